"""Part 3 as outside code writes it: pieces back into text, the shifted targets, the language-model loss, greedy decoding, and sampling's
next-token distribution and draws (issue 51).

Why one file: part 3's graded answers share one notebook and one prelude, and each list is a table of answers read
top to bottom; split per answer, the sampler's answers would import the right distribution from another file."""
from .answer import Answer

TARGETS = [
    Answer("lm_targets", "contiguous_slices", "nanoGPT's get_batch: x and y one token apart", """
def make_lm_targets(ids):
    x = ids[:, :-1].contiguous()
    y = ids[:, 1:].contiguous()
    return x, y
""", None),
    Answer("lm_targets", "narrow", "torch.narrow on the time axis", """
def make_lm_targets(ids):
    length = ids.size(1) - 1
    return ids.narrow(1, 0, length), ids.narrow(1, 1, length)
""", None),
    Answer("lm_targets", "ellipsis_slices", "slices on the last axis, whatever comes before it", """
def make_lm_targets(ids):
    return ids[..., :-1], ids[..., 1:]
""", None),
    Answer("lm_targets", "rolled", "torch.roll to shift the targets, the inputs kept whole", """
def make_lm_targets(ids):
    targets = torch.roll(ids, shifts=-1, dims=1)
    return ids, targets
""", "targets.rolled"),
    Answer("lm_targets", "batch_axis", "slicing written for one 1-D sequence, applied to a batch", """
def make_lm_targets(ids):
    return ids[:-1], ids[1:]
""", "targets.batch_axis"),
    Answer("lm_targets", "full_inputs", "the inputs kept whole, only the targets shifted", """
def make_lm_targets(ids):
    return ids, ids[:, 1:]
""", "targets.lengths_differ"),
    Answer("lm_targets", "swapped", "the pair returned the other way round (targets, inputs)", """
def make_lm_targets(ids):
    inputs, targets = ids[:, :-1], ids[:, 1:]
    return targets, inputs
""", "targets.swapped"),
]

LOSS = [
    Answer("lm_loss", "functional_view", "nanoGPT's F.cross_entropy on viewed logits, ignoring the padding id", """
import torch.nn.functional as F
def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=PAD_ID)
""", None),
    Answer("lm_loss", "class_axis_second", "CrossEntropyLoss on (batch, classes, seq): the class axis moved", """
def lm_loss(logits, targets):
    criterion = nn.CrossEntropyLoss(ignore_index=PAD_ID)
    return criterion(logits.transpose(1, 2), targets)
""", None),
    Answer("lm_loss", "gather_by_hand", "log-softmax, gather the target's log-probability, average the real tokens",
           """
def lm_loss(logits, targets):
    log_probs = logits.log_softmax(dim=-1)
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = (targets != PAD_ID).float()
    return -(picked * real).sum() / real.sum()
""", None),
    Answer("lm_loss", "no_ignore_index", "the loss of a tutorial without padding, padding then counted", """
import torch.nn.functional as F
def lm_loss(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
""", "loss.padding_counted"),
    Answer("lm_loss", "nll_on_logits", "F.nll_loss on raw logits (it expects log-probabilities)", """
import torch.nn.functional as F
def lm_loss(logits, targets):
    return F.nll_loss(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=PAD_ID)
""", "loss.nll_on_logits"),
    Answer("lm_loss", "unflattened", "(batch, seq, vocab) handed to cross_entropy as it is", """
import torch.nn.functional as F
def lm_loss(logits, targets):
    return F.cross_entropy(logits, targets, ignore_index=PAD_ID)
""", "loss.class_axis"),
    Answer("lm_loss", "softmax_then_ce", "probabilities fed to CrossEntropyLoss (the original lab's defect)", """
import torch.nn.functional as F
def lm_loss(logits, targets):
    probs = F.softmax(logits, dim=-1)
    return nn.CrossEntropyLoss(ignore_index=PAD_ID)(probs.view(-1, probs.size(-1)), targets.view(-1))
""", "loss.softmax_first"),
]

GREEDY = [
    Answer("greedy", "tensor_cat", "a tensor grown with torch.cat, as generate loops in tutorials do", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(ids)
            next_id = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            if next_id.item() == eos_id:
                break
            ids = torch.cat([ids, next_id], dim=1)
    return ids[0, len(prompt_ids):].tolist()
""", None),
    Answer("greedy", "inference_mode_softmax", "@torch.inference_mode, argmax of the softmax (same argmax)", """
import torch.nn.functional as F
@torch.inference_mode()
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    sequence = list(prompt_ids)
    generated = []
    while len(generated) < max_new_tokens:
        probs = F.softmax(model(torch.tensor(sequence).unsqueeze(0))[0, -1], dim=-1)
        token = int(torch.argmax(probs))
        if token == eos_id:
            break
        generated.append(token)
        sequence.append(token)
    return generated
""", None),
    Answer("greedy", "no_eval", "no model.eval(): dropout stays on while decoding", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    ids = list(prompt_ids)
    out = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_id = model(torch.tensor([ids]))[0, -1].argmax().item()
            if next_id == eos_id:
                break
            ids.append(next_id)
            out.append(next_id)
    return out
""", "greedy.no_eval"),
    Answer("greedy", "returns_sequence", "returns the whole sequence, prompt included, as HF generate does", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    ids = list(prompt_ids)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_id = int(model(torch.tensor([ids]))[0, -1].argmax())
            if next_id == eos_id:
                break
            ids.append(next_id)
    return ids
""", "greedy.returns_prompt"),
    Answer("greedy", "first_position", "the prediction read at position 0 instead of the last", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    ids = list(prompt_ids)
    new = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_id = int(model(torch.tensor([ids]))[0, 0].argmax())
            if next_id == eos_id:
                break
            ids.append(next_id)
            new.append(next_id)
    return new
""", "greedy.wrong_position"),
    Answer("greedy", "eos_appended", "the end token appended before the loop stops", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    ids, new = list(prompt_ids), []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_id = int(model(torch.tensor([ids]))[0, -1].argmax())
            ids.append(next_id)
            new.append(next_id)
            if next_id == eos_id:
                break
    return new
""", "greedy.includes_eos"),
    Answer("greedy", "one_short", "a loop that stops one token early (range(max_new_tokens - 1))", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    ids, new = list(prompt_ids), []
    with torch.no_grad():
        for _ in range(max_new_tokens - 1):
            next_id = int(model(torch.tensor([ids]))[0, -1].argmax())
            if next_id == eos_id:
                break
            ids.append(next_id)
            new.append(next_id)
    return new
""", "greedy.too_few"),
    Answer("greedy", "multinomial_draw", "a generate loop from a sampling tutorial, left drawing", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    ids = list(prompt_ids)
    out = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            probs = torch.softmax(model(torch.tensor([ids]))[0, -1], dim=-1)
            nxt = int(torch.multinomial(probs, 1))
            if nxt == eos_id:
                break
            ids.append(nxt)
            out.append(nxt)
    return out
""", "greedy.samples"),
    Answer("greedy", "drawn_in_training_mode", "a sampling loop with neither eval() nor argmax", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    ids = list(prompt_ids)
    new = []
    for _ in range(max_new_tokens):
        logits = model(torch.tensor([ids]))[0, -1]
        token = torch.distributions.Categorical(logits=logits).sample().item()
        if token == eos_id:
            break
        ids.append(token)
        new.append(token)
    return new
""", ("greedy.samples", "greedy.no_eval")),
    Answer("greedy", "whole_sequence_with_eos", "Hugging Face's generate habits: the prompt kept and the end token "
           "appended", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    sequence = list(prompt_ids)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_id = model(torch.tensor([sequence]))[0, -1].argmax().item()
            sequence.append(next_id)
            if next_id == eos_id:
                break
    return sequence
""", ("greedy.returns_prompt", "greedy.includes_eos")),
    Answer("greedy", "first_position_in_training", "position 0 read at every step, dropout left on", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    ids = list(prompt_ids)
    generated = []
    for _ in range(max_new_tokens):
        with torch.no_grad():
            nxt = int(model(torch.tensor([ids]))[0, 0].argmax())
        if nxt == eos_id:
            break
        ids.append(nxt)
        generated.append(nxt)
    return generated
""", ("greedy.wrong_position", "greedy.no_eval")),
    Answer("greedy", "sequence_one_short", "a while loop over the sequence's length, the prompt returned with it and "
           "one token short", """
def greedy_generate_ids(model, prompt_ids, max_new_tokens=30, eos_id=EOS_ID):
    model.eval()
    tokens = list(prompt_ids)
    with torch.no_grad():
        while len(tokens) < len(prompt_ids) + max_new_tokens - 1:
            token = int(model(torch.tensor([tokens]))[0, -1].argmax())
            if token == eos_id:
                break
            tokens.append(token)
    return tokens
""", ("greedy.returns_prompt", "greedy.too_few")),
]

# The right next_token_probs the sampler's answers call (the student's cell before it: graded on its own).
RIGHT_NEXT_TOKEN_PROBS = """
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        drop = ordered.cumsum(dim=-1) - ordered >= top_p
        probs = probs.masked_fill(drop.scatter(-1, order, drop), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs
"""

# Logit warpers as Hugging Face's generation code chains them: top-p on an ascending sort, cumsum <= 1 - p removed.
_ASCENDING_TOP_P = """
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    scores = logits / temperature
    if top_k is not None:
        top_k = min(top_k, scores.size(-1))
        threshold = torch.topk(scores, top_k)[0][..., -1, None]
        scores = scores.masked_fill(scores < threshold, -float("inf"))
    if top_p is not None:
        sorted_scores, sorted_indices = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= (1 - top_p)
        remove[..., -1:] = False
        scores = scores.masked_fill(remove.scatter(-1, sorted_indices, remove), -float("inf"))
    return torch.softmax(scores, dim=-1)
"""

# The much-copied top-p snippet: remove cumsum > p, then shift the mask right so the crossing token stays.
_SHIFTED = """
import torch.nn.functional as F
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    logits = logits / temperature
    if top_k:
        values, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = torch.where(logits < values[..., [-1]], torch.full_like(logits, -float("inf")), logits)
    if top_p is not None:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
        sorted_indices_to_remove = cumulative_probs > top_p
        %s
        indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)
        logits = logits.masked_fill(indices_to_remove, -float("inf"))
    return F.softmax(logits, dim=-1)
"""
_SHIFT = ("sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()\n"
          "        sorted_indices_to_remove[..., 0] = False")


def _variant(change: str, into: str) -> str:
    assert change in RIGHT_NEXT_TOKEN_PROBS
    return RIGHT_NEXT_TOKEN_PROBS.replace(change, into)


DECODING = [
    Answer("decoding", "ascending_warpers", "Hugging Face's logit warpers: top-k threshold, top-p on an ascending sort",
           _ASCENDING_TOP_P, None),
    Answer("decoding", "shifted_mask", "the widely copied top-p filter, its removal mask shifted right by one",
           _SHIFTED % _SHIFT, None),
    Answer("decoding", "masked_fill_steps", "one masked_fill per filter, probabilities sorted once", RIGHT_NEXT_TOKEN_PROBS,
           None),
    Answer("decoding", "probs_over_temperature", "the temperature applied to the probabilities", _variant(
        "    logits = logits / temperature\n",
        "    pass\n").replace("    probs = torch.softmax(logits, dim=-1)\n",
                          "    probs = torch.softmax(logits, dim=-1) / temperature\n    probs = probs / probs.sum(-1, keepdim=True)\n"),
           "decoding.temperature_after_softmax"),
    Answer("decoding", "times_temperature", "the logits multiplied by the temperature", _variant(
        "logits = logits / temperature", "logits = logits * temperature"), "decoding.temperature_multiplied"),
    Answer("decoding", "topk_indices", "top-k kept by topk's indices: exactly k tokens, a tie cut", _variant(
        """        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))""",
        """        keep = torch.zeros_like(logits, dtype=torch.bool)
        keep.scatter_(-1, torch.topk(logits, top_k, dim=-1).indices, True)
        logits = logits.masked_fill(~keep, float("-inf"))"""), "decoding.top_k_ties"),
    Answer("decoding", "unshifted_mask", "the same snippet without the shift: the crossing token removed", _SHIFTED % "",
           "decoding.top_p_crossing_dropped"),
    Answer("decoding", "comparison_flipped", "the top-p comparison the wrong way round", _variant(
        "drop = ordered.cumsum(dim=-1) - ordered >= top_p", "drop = ordered.cumsum(dim=-1) - ordered < top_p"),
           "decoding.top_p_wrong_side"),
    Answer("decoding", "not_renormalised", "the filtered tokens zeroed, the rest left as it was", _variant(
        "        probs = probs / probs.sum(dim=-1, keepdim=True)\n", ""), "decoding.no_renormalisation"),
]

SAMPLING = [
    Answer("sampling", "multinomial", "torch.multinomial on the distribution, one draw per row",  """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    probs = next_token_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
""", None),
    Answer("sampling", "categorical", "torch.distributions.Categorical, the generator not used", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return torch.distributions.Categorical(probs=next_token_probs(logits, temperature, top_k, top_p)).sample()
""", None),
    Answer("sampling", "gumbel_max", "the Gumbel-max trick: argmax of log-probabilities plus Gumbel noise", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    probs = next_token_probs(logits, temperature, top_k, top_p)
    uniform = torch.rand(probs.shape, generator=generator).clamp_min(1e-12)
    return (probs.log() - torch.log(-torch.log(uniform))).argmax(dim=-1)
""", None),
    Answer("sampling", "inverse_cdf", "inverse transform sampling with searchsorted on the cumulative sum", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    cdf = next_token_probs(logits, temperature, top_k, top_p).cumsum(dim=-1)
    u = torch.rand(cdf.shape[:-1] + (1,), generator=generator) * cdf[..., -1:]
    return torch.searchsorted(cdf, u).squeeze(-1).clamp_max(cdf.size(-1) - 1)
""", None),
    Answer("sampling", "argmax", "the most likely token taken, as greedy decoding does", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return next_token_probs(logits, temperature, top_k, top_p).argmax(dim=-1)
""", "sampling.greedy"),
    Answer("sampling", "raw_softmax", "a draw from softmax(logits): the settings never used", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)
""", "sampling.settings_ignored"),
    Answer("sampling", "softmax_again", "softmax applied to what is already a distribution", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    probs = next_token_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(torch.softmax(probs, dim=-1), 1, generator=generator).squeeze(-1)
""", "sampling.softmax_twice"),
    Answer("sampling", "randint", "a random token id, the probabilities not used as weights", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return torch.randint(0, logits.size(-1), logits.shape[:-1], generator=generator)
""", "sampling.uniform"),
    Answer("sampling", "column", "torch.multinomial's (batch, 1) column returned as it is", """
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return torch.multinomial(next_token_probs(logits, temperature, top_k, top_p), 1, generator=generator)
""", "wrong_shape"),
]

PIECES = [
    Answer("pieces", "filter_join_replace", "markers filtered, pieces joined, the mark replaced, ends stripped", """
def pieces_to_text(pieces):
    kept = [p for p in pieces if p not in ("<s>", "</s>", "<pad>", "<mask>")]
    return "".join(kept).replace("\u2581", " ").strip()
""", None),
    Answer("pieces", "regex_markers", "markers removed with a regular expression on the joined text", """
import re
def pieces_to_text(pieces):
    text = re.sub(r"</?s>|<pad>|<mask>", "", "".join(pieces))
    return text.replace("\u2581", " ").strip()
""", None),
    Answer("pieces", "word_builder", "words built piece by piece, as SentencePiece's decoder loop does", """
def pieces_to_text(pieces):
    words = []
    for piece in pieces:
        if piece in {"<s>", "</s>", "<pad>", "<mask>"}:
            continue
        if piece.startswith("\u2581") or not words:
            words.append(piece.lstrip("\u2581"))
        else:
            words[-1] += piece
    return " ".join(words)
""", None),
    Answer("pieces", "joined_only", "the pieces joined, the word-start mark left in", """
def pieces_to_text(pieces):
    return "".join(p for p in pieces if p not in ("<s>", "</s>", "<pad>", "<mask>"))
""", "tokens.marker_kept"),
    Answer("pieces", "ascii_underscore", "the ASCII underscore replaced, which the pieces do not hold", """
def pieces_to_text(pieces):
    kept = [p for p in pieces if p not in ("<s>", "</s>", "<pad>", "<mask>")]
    return "".join(kept).replace("_", " ").strip()
""", "tokens.marker_kept"),
    Answer("pieces", "space_join", "pieces joined with spaces, as words are", """
def pieces_to_text(pieces):
    kept = [p.replace("\u2581", "") for p in pieces if p not in ("<s>", "</s>", "<pad>", "<mask>")]
    return " ".join(kept)
""", "tokens.pieces_as_words"),
    Answer("pieces", "not_stripped", "the mark replaced, the ends not stripped", """
def pieces_to_text(pieces):
    kept = [p for p in pieces if p not in ("<s>", "</s>", "<pad>", "<mask>")]
    return "".join(kept).replace("\u2581", " ")
""", "tokens.leading_space"),
    Answer("pieces", "markers_kept", "every piece joined, the markers with them", """
def pieces_to_text(pieces):
    return "".join(pieces).replace("\u2581", " ").strip()
""", "tokens.specials_kept"),
]

ANSWERS = [*PIECES, *TARGETS, *LOSS, *GREEDY, *DECODING, *SAMPLING]
