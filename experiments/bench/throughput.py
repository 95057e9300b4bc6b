"""Is translab's training loop as fast as bare PyTorch?  ``training.train_steps`` against a minimal loop written
inline below, on the pretraining workload (the checkpoint's architecture, batches of 32 x 64 real tokens), on
identical copies of the model and optimizer and the same batches, in alternating rounds (the median round counts)
so that a noisy neighbour hurts both alike.  Then fp32 against bf16 autocast."""
from __future__ import annotations

import copy
import statistics
import time
from contextlib import nullcontext

import torch
from torch import nn
from tqdm.auto import tqdm

from translab import data
from translab.data import PAD_ID
from translab.datasets import Batch, TokenStream
from translab.model import ModelConfig, build_language_model
from translab.training import set_seed, train_steps

ARCHITECTURE = {"nhid": ModelConfig.nhid, "nlayers": ModelConfig.nlayers, "nhead": ModelConfig.nhead,
                "dropout": ModelConfig.dropout}  # the shipped checkpoint's shape


def bare_loop(model: nn.Module, batches: list[Batch], optimizer: torch.optim.Optimizer, clip: float,
              bf16: bool) -> list[float]:
    """The reference: the fewest lines that train the same model on the same batches."""
    model.train()
    losses = []
    for batch in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
            logits = model(batch.inputs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(),
                                           batch.targets.reshape(-1), ignore_index=PAD_ID)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def make_batches(count: int, batch_size: int, seq_len: int, seed: int = 0) -> list[Batch]:
    tokenizer = data.load_tokenizer()
    stream = TokenStream(tokenizer, data.load_reviews()[:300])
    generator = torch.Generator().manual_seed(seed)
    return [stream.random_batch(batch_size, seq_len, generator) for _ in range(count)]


def _timed(loop, model, batches, optimizer, bf16: bool) -> float:
    """Tokens per second of one pass of ``loop``."""
    tokens = sum(b.inputs.numel() for b in batches)
    start = time.perf_counter()
    loop(model, batches, optimizer, bf16)
    return tokens / (time.perf_counter() - start)


def throughput(steps: int, rounds: int, warmup: int, batch_size: int, seq_len: int, bf16: bool,
               progress: bool = True) -> dict:
    """Median tokens/s of the translab loop and the bare loop over alternating rounds."""
    set_seed(0)
    ntoken = data.load_tokenizer().get_piece_size()
    models = {"translab": build_language_model(ModelConfig(ntoken=ntoken, **ARCHITECTURE))}
    models["bare"] = copy.deepcopy(models["translab"])
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01) for k, m in models.items()}
    loops = {
        "translab": lambda m, b, o, bf: train_steps(m, b, o, None, clip=1.0, bf16=bf, progress=False),
        "bare": lambda m, b, o, bf: bare_loop(m, b, o, clip=1.0, bf16=bf),
    }
    batches = make_batches(steps, batch_size, seq_len)
    for name in loops:  # warm up allocators and kernels, untimed
        loops[name](models[name], batches[:warmup], optimizers[name], bf16)
    measured: dict[str, list[float]] = {name: [] for name in loops}
    label = "bf16" if bf16 else "fp32"
    for round_ in tqdm(range(rounds), desc=f"throughput {label}", disable=not progress, leave=False):
        order = list(loops) if round_ % 2 == 0 else list(reversed(loops))
        for name in order:
            measured[name].append(_timed(loops[name], models[name], batches, optimizers[name], bf16))
    result = {name: {"tokens_per_s": statistics.median(v), "rounds": v} for name, v in measured.items()}
    result["ratio"] = result["translab"]["tokens_per_s"] / result["bare"]["tokens_per_s"]
    return result
