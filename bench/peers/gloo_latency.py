#!/usr/bin/env python3
"""The peer of `topspin bench dist`'s all-reduce latency row: PyTorch's own
Gloo process group (torch 2.11 from the project's venv) summing 4 floats between 2
local processes over a file store, as topspin's Comm does.

Prints one JSON object: {"allreduce_us": mean microseconds per all-reduce}.
usage: gloo_latency.py STORE_FILE [--iters 200]
"""
import argparse
import json
import multiprocessing
import os
import time

import torch
import torch.distributed as dist


def rank_main(rank, store, iters, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    t = torch.zeros(4)
    for _ in range(20):
        dist.all_reduce(t)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    seconds = time.perf_counter() - start
    if rank == 0:
        queue.put(seconds / iters * 1e6)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args()
    if os.path.exists(args.store):
        os.remove(args.store)
    queue = multiprocessing.Queue()
    ranks = [multiprocessing.Process(target=rank_main, args=(r, args.store, args.iters, queue))
             for r in range(2)]
    for p in ranks:
        p.start()
    latency = queue.get(timeout=300)
    for p in ranks:
        p.join()
    print(json.dumps({"allreduce_us": latency}))


if __name__ == "__main__":
    main()
