"""Part 3 as outside code writes it: the shifted targets, the language-model loss, greedy decoding."""
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
]

ANSWERS = [*TARGETS, *LOSS, *GREEDY]
