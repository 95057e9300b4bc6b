"""Pretrain the causal language model that notebooks 03 and 04 load (``make pretrain``).

    python -m experiments.pretrain --steps 9000 --threads 1

Writes ``artifacts/pretrained_lm.pt`` (best held-out perplexity so far, rewritten as it
improves) and ``artifacts/pretrained_lm.json``, the manifest: command, seed, data hashes,
steps, wall time, held-out perplexity, curve.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from translab import data
from translab.checkpoint import PRETRAINED_PATH, save_checkpoint
from translab.datasets import TokenStream, heldout_batches, pretraining_documents
from translab.model import ModelConfig, build_language_model
from translab.paths import as_recorded
from translab.training import evaluate_language_model, fast_bf16_available, set_seed, train_steps

def warmup_cosine(optimizer, warmup: int, total: int, floor: float = 0.1):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.pretrain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=7000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--dropout", type=float, default=ModelConfig.dropout)
    parser.add_argument("--nhid", type=int, default=ModelConfig.nhid)
    parser.add_argument("--nlayers", type=int, default=ModelConfig.nlayers)
    parser.add_argument("--nhead", type=int, default=ModelConfig.nhead)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = PyTorch's default)")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                        help="bf16 autocast or not; auto = bf16 only on CPUs with native bf16 (else it is ~10x slower)")
    parser.add_argument("--fp32", action="store_true", help="same as --precision fp32")
    parser.add_argument("--out", type=Path, default=PRETRAINED_PATH)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--extra-text", type=Path,
                        help="a folder of *.txt documents added to the training text (e.g. general English)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    set_seed(args.seed)
    precision = "fp32" if args.fp32 else args.precision
    bf16 = precision == "bf16" or (precision == "auto" and fast_bf16_available())

    tokenizer = data.load_tokenizer()
    train_docs, _ = pretraining_documents(args.extra_text)
    stream = TokenStream(tokenizer, train_docs)
    evaluation = heldout_batches(tokenizer, args.seq_len, args.batch_size)
    config = ModelConfig(ntoken=tokenizer.get_piece_size(), nhid=args.nhid, nlayers=args.nlayers, nhead=args.nhead,
                         dropout=args.dropout)
    model = build_language_model(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = warmup_cosine(optimizer, args.warmup, args.steps)
    generator = torch.Generator().manual_seed(args.seed)
    manifest = {
        "command": "python -m experiments.pretrain " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seed": args.seed, "config": config.to_dict(),
        "args": {k: as_recorded(v) if isinstance(v, Path) else str(v) for k, v in vars(args).items()},
        "bf16_autocast": bf16, "torch": str(torch.__version__), "threads": torch.get_num_threads(),
        "data_sha256": {**{f.name: f.sha256 for s in data.SOURCES for f in s.files},
                        "tokenizer.model": data.sha256_of(data.tokenizer_path())},
        "train_tokens": len(stream), "heldout_tokens": sum(int(b.targets.numel()) for b in evaluation),
        "curve": [],
    }
    print(f"train tokens {len(stream):,}; held-out tokens {manifest['heldout_tokens']:,}; "
          f"{args.steps} steps of {args.batch_size}x{args.seq_len}", flush=True)
    start, best, done = time.time(), float("inf"), 0
    while done < args.steps:
        chunk = min(args.eval_every, args.steps - done)
        batches = (stream.random_batch(args.batch_size, args.seq_len, generator) for _ in range(chunk))
        losses = train_steps(model, batches, optimizer, scheduler, clip=1.0, bf16=bf16,
                             progress=not args.no_progress, total=chunk, description=f"steps {done}+")
        done += chunk
        heldout = evaluate_language_model(model, evaluation, bf16=False)
        elapsed = time.time() - start
        point = {"step": done, "minutes": round(elapsed / 60, 2), "train_loss": sum(losses) / len(losses),
                 "heldout_loss": heldout["loss"], "heldout_perplexity": heldout["perplexity"]}
        manifest["curve"].append(point)
        print(json.dumps(point), flush=True)
        if heldout["perplexity"] < best:
            best = heldout["perplexity"]
            manifest.update({"steps": done, "wall_time_s": round(elapsed, 1),
                             "heldout_perplexity": best, "heldout_loss": heldout["loss"]})
            save_checkpoint(args.out, model, config, manifest={k: v for k, v in manifest.items() if k != "curve"})
        manifest["total_wall_time_s"] = round(elapsed, 1)
        args.out.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
