"""NDCG@k for the Python peers, with topspin's (LightGBM's) conventions: gain
2^label - 1, log2 discount, stable ties, a list without relevant products
scores 1 (topspin/model/rank_metrics.h)."""
import numpy as np


def ndcg_at(scores, labels, k=10):
    order = np.argsort(-scores, kind="stable")[:k]
    gains = np.exp2(labels) - 1
    disc = 1 / np.log2(np.arange(2, len(order) + 2))
    dcg = (gains[order] * disc).sum()
    ideal = np.sort(gains)[::-1][:k]
    idcg = (ideal * disc[:len(ideal)]).sum()
    return dcg / idcg if idcg > 0 else 1.0
