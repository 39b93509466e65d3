"""topspin's GPT-2 against Hugging Face transformers, with no download.

  python tests/gpt2_transformers_test.py TOPSPIN_BINARY SOURCE_DIR

1. Import: a small random GPT2LMHeadModel (save_pretrained, safetensors),
   with a byte-level BPE tokenizer trained by `tokenizers` on the Debian
   licence texts (/usr/share/common-licenses), goes through `topspin import
   gpt2`; topspin's logits of a prompt match transformers' to 1e-5 (fp32),
   and greedy generation gives the same tokens.
2. Export: a GPT trained by topspin (bytes, exact GELU, vocabulary padded to
   a multiple of 64) goes out through `topspin export gpt2`; transformers
   loads it and gives topspin's logits to 1e-5.

Exit 77 (skipped) when transformers is missing, except under CI=true.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as e:  # pragma: no cover
    print(f"gpt2_transformers_test: {e}", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

TOPSPIN, SOURCE = sys.argv[1], sys.argv[2]
CORPUS = sorted(glob.glob("/usr/share/common-licenses/*"))
PROMPT = "The licence grants you the right to copy"


def run(*args):
    r = subprocess.run([TOPSPIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"topspin {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def ours(run_dir, work, max_new_tokens):
    """topspin's prompt ids, prompt logits and greedy continuation ids."""
    out, logits = os.path.join(work, "gen.json"), os.path.join(work, "logits.safetensors")
    run("generate", run_dir, "--prompt", PROMPT, "--max-new-tokens", str(max_new_tokens),
        "--temperature", "0", "--no-stop", "--json", out, "--prompt-logits", logits)
    g = json.load(open(out))
    return g["prompt_ids"], load_file(logits)["logits"], g["ids"]


def check_logits(what, hf, ids, got):
    with torch.no_grad():
        want = hf(torch.tensor([ids])).logits[0]
    diff = (want - got).abs().max().item()
    print(f"{what}: logits [{want.shape[0]} x {want.shape[1]}], max |topspin - transformers| "
          f"= {diff:.2e}")
    assert want.shape == got.shape, (want.shape, got.shape)
    assert torch.allclose(want, got, atol=1e-5, rtol=1e-5), diff


def check_import(work):
    hf_dir = os.path.join(work, "hf")
    os.makedirs(hf_dir)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train(CORPUS, trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                          show_progress=False))
    tok.model.save(hf_dir)  # vocab.json, merges.txt
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=64, n_embd=64, n_layer=2,
                        n_head=4, activation_function="gelu_new", resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=tok.token_to_id("<|endoftext|>"),
                        eos_token_id=tok.token_to_id("<|endoftext|>"))
    hf = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # LayerNorms away from 1 and 0, so their layout matters
        for name, p in hf.named_parameters():
            if ".ln_" in name or "ln_f" in name or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    hf.save_pretrained(hf_dir, safe_serialization=True)
    run_dir = os.path.join(work, "imported")
    run("import", "gpt2", "--from", hf_dir, "--to", run_dir)

    ids, logits, new_ids = ours(run_dir, work, 24)
    want_ids = tok.encode(PROMPT).ids
    assert ids == want_ids, (ids, want_ids)
    check_logits("import", hf, ids, logits)
    with torch.no_grad():
        greedy = hf.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                             pad_token_id=config.eos_token_id)[0, len(ids):].tolist()
    print(f"import: greedy {len(new_ids)} tokens, topspin == transformers: {new_ids == greedy}")
    assert new_ids == greedy, (new_ids, greedy)


def check_export(work):
    data = os.path.join(work, "bytes")
    run("convert", *CORPUS, "--format", "text", "--out", data)
    run_dir = os.path.join(work, "trained")
    run("train", os.path.join(SOURCE, "configs/gpt.yaml"), "--run-dir", run_dir,
        "--set", f"data.train={data}", "--set", "model.gpt.layers=2",
        "--set", "model.gpt.d_model=64", "--set", "model.gpt.heads=4",
        "--set", "model.gpt.context=64", "--set", "model.gpt.vocab_multiple=64",
        "--set", "pipeline.batch_size=8", "--set", "train.steps=30",
        "--set", "train.checkpoint_every=30", "--set", "train.log_every=10",
        "--set", "optim.warmup_steps=5")
    hf_dir = os.path.join(work, "exported")
    run("export", "gpt2", run_dir, "--to", hf_dir)
    hf = GPT2LMHeadModel.from_pretrained(hf_dir).eval()
    assert hf.config.vocab_size == 320 and hf.config.activation_function == "gelu"
    assert hf.config.eos_token_id == 256  # the byte tokenizer's end of text
    ids, logits, _ = ours(run_dir, work, 1)
    assert ids == list(PROMPT.encode()), ids
    check_logits("export", hf, ids, logits)


with tempfile.TemporaryDirectory() as work:
    check_import(work)
    check_export(work)
print("gpt2_transformers_test: ok")
