"""Part 5 as outside code writes it: BERT's 80/10/10 masking and the masked-LM loss."""
from .answer import Answer

MASKING = [
    Answer("mlm_masking", "rand_below", "uniform draws compared with the rates, masked_fill for the labels", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    special = torch.isin(ids, torch.tensor(SPECIAL_IDS))
    chosen = (torch.rand(ids.shape, generator=generator) < mlm_probability) & ~special
    labels = ids.masked_fill(~chosen, PAD_ID)
    inputs = ids.clone()
    to_mask = (torch.rand(ids.shape, generator=generator) < 0.8) & chosen
    inputs[to_mask] = MASK_ID
    to_random = (torch.rand(ids.shape, generator=generator) < 0.5) & chosen & ~to_mask
    random_ids = torch.randint(FIRST_REGULAR_ID, vocab_size, ids.shape, generator=generator)
    inputs = torch.where(to_random, random_ids, inputs)
    return inputs, labels
""", None),
    Answer("mlm_masking", "one_draw_split", "one uniform draw per chosen token split at 0.8 and 0.9", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    inputs = ids.clone()
    labels = torch.full_like(ids, PAD_ID)
    regular = ids >= FIRST_REGULAR_ID
    chosen = regular & (torch.rand(ids.shape, generator=generator) < mlm_probability)
    labels[chosen] = ids[chosen]
    u = torch.rand(ids.shape, generator=generator)
    inputs[chosen & (u < 0.8)] = MASK_ID
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = torch.randint(FIRST_REGULAR_ID, vocab_size, (int(swap.sum()),), generator=generator)
    return inputs, labels
""", None),
    Answer("mlm_masking", "collator_minus_100", "Hugging Face's collator: labels -100 where nothing is predicted", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    labels = ids.clone()
    inputs = ids.clone()
    probability_matrix = torch.full(labels.shape, mlm_probability)
    probability_matrix.masked_fill_(torch.isin(ids, torch.tensor(SPECIAL_IDS)), value=0.0)
    masked_indices = torch.bernoulli(probability_matrix, generator=generator).bool()
    labels[~masked_indices] = -100
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & masked_indices
    inputs[replaced] = MASK_ID
    random = torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool() & masked_indices & ~replaced
    words = torch.randint(FIRST_REGULAR_ID, vocab_size, labels.shape, generator=generator)
    inputs[random] = words[random]
    return inputs, labels
""", "masking.ignore_index"),
    Answer("mlm_masking", "mask_only", "a tutorial that replaces every chosen token by [MASK] (no 80/10/10)", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    inputs = ids.clone()
    rand = torch.rand(ids.shape, generator=generator)
    chosen = (rand < mlm_probability) & ~torch.isin(ids, torch.tensor(SPECIAL_IDS))
    labels = torch.where(chosen, ids, torch.full_like(ids, PAD_ID))
    inputs[chosen] = MASK_ID
    return inputs, labels
""", "masking.all_masked"),
    Answer("mlm_masking", "specials_chosen", "every position may be chosen, special tokens included", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    inputs = ids.clone()
    labels = torch.full_like(ids, PAD_ID)
    chosen = torch.bernoulli(torch.full(ids.shape, mlm_probability), generator=generator).bool()
    labels[chosen] = ids[chosen]
    masked = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
    inputs[masked] = MASK_ID
    randomized = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & chosen & ~masked
    random_ids = torch.randint(FIRST_REGULAR_ID, vocab_size, ids.shape, generator=generator)
    inputs[randomized] = random_ids[randomized]
    return inputs, labels
""", "masking.special_chosen"),
    Answer("mlm_masking", "random_whole_vocab", "random replacements drawn from the whole vocabulary (specials "
           "too)", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    inputs = ids.clone()
    labels = torch.full_like(ids, PAD_ID)
    probability = torch.full(ids.shape, mlm_probability)
    probability[torch.isin(ids, torch.tensor(SPECIAL_IDS))] = 0.0
    chosen = torch.bernoulli(probability, generator=generator).bool()
    labels[chosen] = ids[chosen]
    masked = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
    inputs[masked] = MASK_ID
    randomized = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & chosen & ~masked
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    inputs[randomized] = random_ids[randomized]
    return inputs, labels
""", "masking.random_special"),
    Answer("mlm_masking", "ten_percent_overlaps", "bernoulli(0.1) for the random tokens, not excluding those "
           "masked", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    inputs = ids.clone()
    labels = torch.full_like(ids, PAD_ID)
    probability = torch.full(ids.shape, mlm_probability)
    probability[torch.isin(ids, torch.tensor(SPECIAL_IDS))] = 0.0
    chosen = torch.bernoulli(probability, generator=generator).bool()
    labels[chosen] = ids[chosen]
    masked = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
    inputs[masked] = MASK_ID
    randomized = torch.bernoulli(torch.full(ids.shape, 0.1), generator=generator).bool() & chosen
    random_ids = torch.randint(FIRST_REGULAR_ID, vocab_size, ids.shape, generator=generator)
    inputs[randomized] = random_ids[randomized]
    return inputs, labels
""", "masking.split"),
    Answer("mlm_masking", "global_rng", "torch.rand without the generator: a different masking at every call", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    inputs = ids.clone()
    labels = torch.full_like(ids, PAD_ID)
    chosen = (torch.rand(ids.shape) < mlm_probability) & (ids >= FIRST_REGULAR_ID)
    labels[chosen] = ids[chosen]
    u = torch.rand(ids.shape)
    inputs[chosen & (u < 0.8)] = MASK_ID
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = torch.randint(FIRST_REGULAR_ID, vocab_size, ids.shape)[swap]
    return inputs, labels
""", "masking.no_generator"),
    Answer("mlm_masking", "no_clone", "inputs edited in place: the caller's ids are overwritten", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    labels = torch.full_like(ids, PAD_ID)
    chosen = (torch.rand(ids.shape, generator=generator) < mlm_probability) & (ids >= FIRST_REGULAR_ID)
    labels[chosen] = ids[chosen]
    u = torch.rand(ids.shape, generator=generator)
    ids[chosen & (u < 0.8)] = MASK_ID
    swap = chosen & (u >= 0.8) & (u < 0.9)
    ids[swap] = torch.randint(FIRST_REGULAR_ID, vocab_size, ids.shape, generator=generator)[swap]
    return ids, labels
""", "mutates_input"),
    Answer("mlm_masking", "in_place_boolean_labels", "a first attempt that edits the ids it was given and returns the "
           "choice itself as the labels", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    special = torch.isin(ids, torch.tensor(SPECIAL_IDS))
    chosen = (torch.rand(ids.shape, generator=generator) < mlm_probability) & ~special
    draw = torch.rand(ids.shape, generator=generator)
    ids[chosen & (draw < 0.8)] = MASK_ID
    swap = chosen & (draw >= 0.8) & (draw < 0.9)
    ids[swap] = torch.randint(FIRST_REGULAR_ID, vocab_size, (int(swap.sum()),), generator=generator)
    return ids, chosen
""", ("mutates_input", "wrong_dtype")),
    Answer("mlm_masking", "collator_global_rng", "Hugging Face's collator copied with its -100 and torch.bernoulli "
           "left on the global generator", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    labels = ids.clone()
    inputs = ids.clone()
    probability_matrix = torch.full(labels.shape, mlm_probability)
    probability_matrix.masked_fill_(torch.isin(ids, torch.tensor(SPECIAL_IDS)), value=0.0)
    masked_indices = torch.bernoulli(probability_matrix).bool()
    labels[~masked_indices] = -100
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked_indices
    inputs[replaced] = MASK_ID
    random = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked_indices & ~replaced
    words = torch.randint(FIRST_REGULAR_ID, vocab_size, labels.shape)
    inputs[random] = words[random]
    return inputs, labels
""", ("masking.ignore_index", "masking.no_generator")),
    Answer("mlm_masking", "collator_mask_only", "a collator cut down to [MASK] only, its -100 kept", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    labels = ids.clone()
    inputs = ids.clone()
    special = torch.isin(ids, torch.tensor(SPECIAL_IDS))
    picked = (torch.rand(ids.shape, generator=generator) < mlm_probability) & ~special
    labels[~picked] = -100
    inputs[picked] = MASK_ID
    return inputs, labels
""", ("masking.ignore_index", "masking.all_masked")),
    Answer("mlm_masking", "in_place_global_rng", "the masking written into the caller's ids, with torch.rand unseeded",
           """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    labels = torch.full_like(ids, PAD_ID)
    chosen = (torch.rand(ids.shape) < mlm_probability) & (ids >= FIRST_REGULAR_ID)
    labels[chosen] = ids[chosen]
    u = torch.rand(ids.shape)
    ids[chosen & (u < 0.8)] = MASK_ID
    swap = chosen & (u >= 0.8) & (u < 0.9)
    ids[swap] = torch.randint(FIRST_REGULAR_ID, vocab_size, (int(swap.sum()),))
    return ids, labels
""", ("mutates_input", "masking.no_generator")),
    Answer("mlm_masking", "specials_and_unchosen", "the 80/10/10 draws applied to every position, the choice made "
           "over all tokens", """
def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
    inputs = ids.clone()
    labels = torch.full_like(ids, PAD_ID)
    chosen = torch.rand(ids.shape, generator=generator) < mlm_probability
    labels[chosen] = ids[chosen]
    u = torch.rand(ids.shape, generator=generator)
    inputs[u < 0.8 * mlm_probability] = MASK_ID
    return inputs, labels
""", ("masking.special_chosen", "masking.unchosen_changed", "masking.split")),
]

MLM_LOSS = [
    Answer("mlm_loss", "class_axis_second", "cross_entropy on (batch, vocab, seq), the encoder bidirectional", """
import torch.nn.functional as F
def mlm_loss(model, inputs, labels, padding_mask=None):
    logits = model(inputs, padding_mask, causal=False)
    return F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=PAD_ID)
""", None),
    Answer("mlm_loss", "chosen_positions_only", "the logits of the labelled positions selected first", """
import torch.nn.functional as F
def mlm_loss(model, inputs, labels, padding_mask=None):
    logits = model(inputs, src_key_padding_mask=padding_mask, causal=False)
    chosen = labels != PAD_ID
    return F.cross_entropy(logits[chosen], labels[chosen])
""", None),
    Answer("mlm_loss", "causal_default", "the model called as in part 3, its causal mask on", """
import torch.nn.functional as F
def mlm_loss(model, inputs, labels, padding_mask=None):
    logits = model(inputs, padding_mask)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=PAD_ID)
""", "mlm.causal"),
    Answer("mlm_loss", "minus_100", "Hugging Face's ignore index (-100) while the labels hold PAD_ID", """
def mlm_loss(model, inputs, labels, padding_mask=None):
    logits = model(inputs, padding_mask, causal=False)
    return nn.CrossEntropyLoss(ignore_index=-100)(logits.view(-1, logits.size(-1)), labels.view(-1))
""", "mlm.all_positions"),
    Answer("mlm_loss", "padding_mask_dropped", "the padding mask not passed to the model", """
import torch.nn.functional as F
def mlm_loss(model, inputs, labels, padding_mask=None):
    logits = model(inputs, causal=False)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=PAD_ID)
""", "mlm.no_padding_mask"),
    Answer("mlm_loss", "inputs_as_targets", "the masked inputs used as the targets", """
import torch.nn.functional as F
def mlm_loss(model, inputs, labels, padding_mask=None):
    logits = model(inputs, padding_mask, causal=False)
    keep = labels != PAD_ID
    return F.cross_entropy(logits[keep], inputs[keep])
""", "mlm.inputs_as_labels"),
    Answer("mlm_loss", "no_grad_forward", "the forward pass under torch.no_grad(), as evaluation code has it", """
import torch.nn.functional as F
def mlm_loss(model, inputs, labels, padding_mask=None):
    with torch.no_grad():
        logits = model(inputs, padding_mask, causal=False)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=PAD_ID)
""", "mlm.detached"),
]

ANSWERS = [*MASKING, *MLM_LOSS]
