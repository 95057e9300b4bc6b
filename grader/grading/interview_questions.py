"""The questions of a five-minute code interview (``make interviews``), each beside what it looks for in the
student's answer and what a good reply mentions.

A probe is asked about one line of the student's own answer cell: the first line its ``pattern`` finds (outside
the released stub) is quoted on the page, so the question is about what this student wrote, not about the task in
general.  A task with no matching line falls back to ``FALLBACK``, quoting the student's longest line of their own.
The good replies are for the instructor's eyes: they are never in what students get.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    task: str         # "<notebook>/<grade_id>", as grader.course.withheld.IMPLEMENTS names the answer cells
    pattern: str      # a regular expression over one line of the student's answer
    question: str     # asked about the quoted line
    good_reply: str   # what a reply that shows understanding mentions


MASK, PE, ATTENTION, HEADS_BY_HAND = (f"01_mask_and_positional_encoding/{name}" for name in (
    "mask_answer", "pe_answer", "attention_answer", "mha_answer"))
BASE, HEADS, MODEL, COUNT = (f"02_model_and_parameters/{name}" for name in (
    "transformer_answer", "heads_answer", "model_answer", "count_answer"))
PIECES, TARGETS, LOSS, GREEDY, DECODING, SAMPLING = (f"03_pretraining_and_generation/{name}" for name in (
    "pieces_answer", "targets_answer", "loss_answer", "greedy_answer", "decoding_answer", "sampling_answer"))
ACCURACY, TRANSFER = (f"04_transfer_experiment/{name}" for name in ("accuracy_answer", "transfer_answer"))
MASKING, MLM_LOSS = (f"05_masked_language_modeling/{name}" for name in ("masking_answer", "mlm_loss_answer"))
BERT_BASE, MAPPING, BERT_COUNT, CLASSIFIER = (f"06_transfer_at_scale/{name}" for name in (
    "bert_base_answer", "mapping_answer", "bert_count_answer", "classifier_answer"))

IGNORE_INDEX = ("What does `ignore_index` do in this line, and what would the loss reward without it?",
                "the padding positions (PAD_ID) are left out of the mean; without it the model is scored on predicting "
                "padding, which is easy, so the loss looks better than the model is")

PROBES: tuple[Probe, ...] = (
    Probe(MASK, r"\btriu\b", "Your mask uses `triu`. What does its `diagonal` argument do here, and what changes "
          "with `diagonal=0`?", "diagonal=1 leaves the diagonal at 0, so each position attends to itself; with 0 the "
          "diagonal is masked too, the first row is all -inf and its softmax is NaN"),
    Probe(MASK, r"\btril\b", "Your mask starts from `tril`. Which entries end up -inf, and why those?",
          "the entries above the diagonal (key after query): a position may not attend to later tokens, which it "
          "must predict"),
    Probe(MASK, r"inf|finfo", "Why -inf above the diagonal, and not 0 or a multiplication by 0?",
          "the mask is added to the scores before the softmax; exp(-inf) = 0, so a future token gets exactly zero "
          "weight and the rest still sum to 1; multiplying the scores by 0 leaves exp(0) = 1, not 0"),
    Probe(PE, r"10000|1e4|log\(", "Where does the 10000 in your encoding come from, and what would a smaller base "
          "change?", "it sets the longest wavelength (up to 10000 * 2*pi positions); a smaller base makes the slow "
          "dimensions repeat sooner, so distant positions look alike"),
    Probe(PE, r"register_buffer", "Why `register_buffer`, and not an `nn.Parameter`?",
          "the table is fixed, not trained: a buffer moves with .to(device) and is saved in the state_dict, but "
          "the optimizer never sees it and it is not counted as a parameter"),
    Probe(PE, r"\bsin\b|\bcos\b|0::2|1::2", "Your code fills sines and cosines. Why a sine and a cosine per "
          "frequency, rather than sines alone?", "the (sin, cos) pair of a frequency turns a shift by k positions "
          "into a fixed rotation (a linear map), so relative positions are easy to read; and the pair never "
          "repeats within the wavelength"),
    Probe(ATTENTION, r"sqrt|\*\*\s*-?0?\.5|rsqrt", "You scale the scores by the square root of the head size. What "
          "happens without it when d is large?", "a dot product of d random entries has a variance about d; large "
          "scores saturate the softmax to nearly one-hot, and its gradients vanish"),
    Probe(ATTENTION, r"\+\s*mask|masked_fill", "You apply the mask to the scores. Why before the softmax and not "
          "after it?", "added before, -inf becomes exactly 0 weight and the softmax renormalizes over the allowed "
          "keys; zeroing after it leaves rows that no longer sum to 1"),
    Probe(ATTENTION, r"softmax", "Along which dimension is your softmax, and why that one?",
          "the last one, over the keys: each query's weights over the positions it may see sum to 1"),
    Probe(HEADS_BY_HAND, r"chunk|split\(|in_proj_weight", "How do Q, K and V come out of `in_proj_weight` in this "
          "line? What is its shape?", "(3 * d_model, d_model): the query, key and value projections stacked in "
          "that order; projecting once and cutting in three along the last axis gives q, k, v"),
    Probe(HEADS_BY_HAND, r"view|reshape|transpose", "Name each axis before and after this line.",
          "(batch, seq, d_model) becomes (batch, seq, heads, head_dim), transposed to (batch, heads, seq, "
          "head_dim): each head attends over its own slice of d_model"),
    Probe(BASE, r"sqrt", "Why multiply the embedding by sqrt(nhid), and what does it do with nn.Embedding's "
          "initialization?", "the Transformer paper's embeddings start small (about 1/sqrt(nhid)) and the factor "
          "brings them to the size of the positional encoding; nn.Embedding starts at N(0, 1), so here the token "
          "part is about sqrt(nhid) times larger and position is a small signal at first"),
    Probe(BASE, r"batch_first", "What does `batch_first=True` change, and what would break without it?",
          "without it PyTorch reads the input as (seq, batch, nhid): attention would mix sentences of the batch "
          "and the mask would not match"),
    Probe(BASE, r"dim_feedforward", "Why set `dim_feedforward` here? What is PyTorch's default, and what would it "
          "do to your count?", "the default is 2048; the feed-forward's parameters grow with it (2 * nhid * dff "
          "+ dff + nhid per layer), so the count would no longer match the lab's configuration"),
    Probe(HEADS, r"lengths|sum\(\s*dim\s*=\s*1|padding_mask", "Which position does your classifier read for a "
          "padded sentence, and why not `hidden[:, -1]`?", "the last real token (length - 1): with padding at "
          "the end, position -1 is padding; under the causal mask only the last real token has seen the whole "
          "sentence"),
    Probe(HEADS, r"\[\s*:\s*,\s*-1\s*\]", "You read `hidden[:, -1]`. What sits at that position when a sentence "
          "of the batch is padded?", "padding: its vector says little about the sentence; the last real token "
          "(length - 1) is the one that has seen it all"),
    Probe(MODEL, r"causal|subsequent_mask", "When is your model's mask causal, and why does part 5's masked LM "
          "switch it off?", "causal for the language model, which must not see the token it predicts; the "
          "masked LM predicts hidden tokens from both sides, so it needs the right context"),
    Probe(COUNT, r"nhead", "`nhead` appears in your count. Does the number of heads change the count? Why?",
          "no: the heads split nhid into nhead slices; the projections stay nhid x nhid whatever nhead is"),
    Probe(COUNT, r"\b3\s*\*", "Where does the 3 in this line come from?", "the query, key and value projections, "
          "each nhid x nhid with a bias of nhid, packed into one in_proj"),
    Probe(COUNT, r"norm|2\s*\*\s*\(?\s*2", "How many parameters has one LayerNorm, and how many LayerNorms has a "
          "layer?", "a weight and a bias of nhid each (2 * nhid), and two per layer (after attention, after the "
          "feed-forward)"),
    Probe(COUNT, r"nclasses", "What changes in your count between the language model and the classifier, and why "
          "only that?", "only the head: nhid * outputs + outputs, with ntoken outputs for the LM and nclasses for "
          "the classifier; the base is the same"),
    Probe(PIECES, r"\\u2581|\u2581", "Which character do you turn into a space, and why does SentencePiece write it?",
          "U+2581 marks the start of a word: the spaces are kept inside the pieces, so the text comes back exactly"),
    Probe(TARGETS, r":\s*-1|1\s*:", "Why are the targets the inputs shifted by one? What is lost at each end?",
          "each position predicts the next token; the last input has no next token to predict, and the first token "
          "is never predicted"),
    Probe(LOSS, r"softmax", "You take a softmax before the loss. What does CrossEntropyLoss do with logits already?",
          "it applies log-softmax itself; a softmax before it squashes the scores and weakens the gradients"),
    Probe(LOSS, r"ignore_index", *IGNORE_INDEX),
    Probe(LOSS, r"reshape|view|flatten", "Why reshape the logits and the targets before the loss?",
          "CrossEntropyLoss takes (N, classes) and (N,): batch and time are flattened into N predictions"),
    Probe(GREEDY, r"no_grad|eval\(\)", "Why `eval()` and `no_grad` here?",
          "eval switches dropout off, so the output is deterministic; no_grad keeps no graph, saving memory and time"),
    Probe(GREEDY, r"\[\s*0\s*,\s*-1\s*\]|\[\s*:\s*,\s*-1\s*\]", "Why the logits of the last position?",
          "under the causal mask the last position has seen the whole prompt and predicts the token after it"),
    Probe(GREEDY, r"argmax", "Your decoder takes the argmax. What do its outputs tend to do, and why?",
          "they repeat and stay bland: always the single most likely token, so a loop, once entered, is never left"),
    Probe(DECODING, r"top_?p|cumsum", "Walk me through your top-p cut: is the token that crosses p kept?",
          "yes: the nucleus is the smallest set of most likely tokens whose mass reaches p, so the most likely "
          "token always stays and the crossing one is in"),
    Probe(DECODING, r"top_?k|topk", "With top-k, which tokens survive in your code, and what happens to the others?",
          "the k highest scores; the rest get -inf (probability 0) before the softmax, which renormalizes"),
    Probe(DECODING, r"temperature", "What does dividing by the temperature do at 0.5, and at 2?",
          "below 1 it sharpens the distribution (towards greedy as it nears 0), above 1 it flattens it"),
    Probe(SAMPLING, r"multinomial", "Why sample here rather than take the argmax, and what is the generator for?",
          "sampling gives varied text; a seeded generator makes the draw reproducible"),
    Probe(ACCURACY, r"eval\(\)", "Why `model.eval()` before measuring accuracy?",
          "dropout off: the accuracy is the model's, deterministic, and not lowered by random dropout"),
    Probe(ACCURACY, r"argmax", "Why the argmax of the logits, without a softmax?",
          "the softmax keeps the order of the scores, so the argmax is the same"),
    Probe(TRANSFER, r"deepcopy", "Why a deep copy of the pretrained base?",
          "fine-tuning changes the weights; without a copy it would change the pretrained model itself, which the "
          "other runs (and seeds) start from"),
    Probe(TRANSFER, r"ClassificationHead|Linear", "What is new in your transferred model and what is reused?",
          "the base (embedding, positions, encoder layers) is reused; the head is new, randomly initialized, with "
          "nclasses outputs"),
    Probe(MASKING, r"0\.8\b|\b80\b", "Why replace only 80 % of the chosen tokens by [MASK]?",
          "[MASK] never appears when the model is fine-tuned; the 10 % random and 10 % unchanged tokens make it "
          "keep a useful vector for every token, not just for [MASK]"),
    Probe(MASKING, r"0\.5\b|0\.1\b", "Your code draws the random replacements with this probability. Why that "
          "number?", "of the 20 % not masked, half are replaced by a random token and half are left unchanged: "
          "10 % and 10 % of the chosen"),
    Probe(MASKING, r"SPECIAL|special|isin", "Why are special tokens never chosen?",
          "predicting padding or the sentence markers teaches nothing about language, and their labels are trivial"),
    Probe(MASKING, r"labels", "Which positions get a label in your code, and what do the others get?",
          "only the chosen tokens keep their original id; every other position gets PAD_ID, which the loss ignores"),
    Probe(MLM_LOSS, r"causal\s*=\s*False", "Why `causal=False` for the masked LM?",
          "a hidden token is predicted from both sides; a causal mask would hide its right context"),
    Probe(MLM_LOSS, r"ignore_index", IGNORE_INDEX[0], "positions labelled PAD_ID are left out: here that is every "
          "token that was not chosen, so the model is scored on the chosen 15 % alone"),
    Probe(BERT_BASE, r"gelu", "Why `activation=\"gelu\"`?", "the checkpoint was trained with GELU; with ReLU each "
          "layer would compute something else from the same weights"),
    Probe(BERT_BASE, r"token_type", "What are token type embeddings for, and what is fed for a single sentence?",
          "segment A or B for inputs made of two sentences; a single sentence is all zeros"),
    Probe(BERT_BASE, r"eps", "Why take the LayerNorm's epsilon from the configuration?",
          "BERT's is 1e-12, PyTorch's default 1e-5: small differences per layer add up over the stack"),
    Probe(MAPPING, r"cat\(", "Why concatenate query, key and value, and in which order?",
          "nn.MultiheadAttention keeps one in_proj_weight of shape (3 * hidden, hidden), query then key then value; "
          "another order loads without error and scrambles every attention"),
    Probe(MAPPING, r"LayerNorm", "Which LayerNorm goes to norm1 and which to norm2?",
          "norm1 is the one after attention (attention.output.LayerNorm), norm2 the one after the feed-forward "
          "(output.LayerNorm): both post-LN"),
    Probe(BERT_COUNT, r"max_position|type_vocab", "Which embeddings does BERT have that part 2's model has not?",
          "learned positions (one vector per position, no sinusoids) and token types, plus a LayerNorm on their sum"),
    Probe(CLASSIFIER, r"mean|sum\(\s*dim\s*=\s*1", "Your classifier averages the token vectors. Why leave the "
          "padding out, and why average rather than read one position?", "padding would dilute the mean; the "
          "encoder is bidirectional, so no position is special, and all-MiniLM-L6-v2 was trained with mean pooling"),
)

FALLBACK = Probe("*", "", "Walk me through this line of yours: what does it compute, and what shape does it have?",
                 "what the line computes in the task's terms, with the shapes or values it works on")
