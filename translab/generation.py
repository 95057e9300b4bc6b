"""Greedy decoding: always take the most likely next token."""
from __future__ import annotations

import torch
from torch import nn

from .data import BOS_ID, EOS_ID, normalize


@torch.no_grad()
def greedy_generate(model: nn.Module, tokenizer, prompt: str, max_new_tokens: int = 30) -> str:
    """The prompt's continuation as text; stops at eos or after ``max_new_tokens`` tokens."""
    ids = greedy_generate_ids(model, [BOS_ID] + tokenizer.encode(normalize(prompt)), max_new_tokens)
    return tokenizer.decode(ids)


@torch.no_grad()
def greedy_generate_ids(model: nn.Module, prompt_ids: list[int], max_new_tokens: int = 30,
                        eos_id: int = EOS_ID) -> list[int]:
    """Only the new ids (eos excluded).  The whole prefix is re-encoded at each step: simple, and
    cheap at these lengths."""
    if not prompt_ids:
        raise ValueError("the prompt must hold at least one token (start it with BOS_ID)")
    model.eval()
    ids = list(prompt_ids)
    new: list[int] = []
    for _ in range(max_new_tokens):
        logits = model(torch.tensor([ids]))
        next_id = int(logits[0, -1].argmax())
        if next_id == eos_id:
            break
        ids.append(next_id)
        new.append(next_id)
    return new
