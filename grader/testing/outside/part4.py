"""Part 4 as outside code writes it: an accuracy over batches, and the transfer of a pretrained base.

The accuracies follow the evaluation loops of image-classification tutorials and course homework (``torch.max`` of
the logits, running counts, a percentage printed at the end, per-batch means, scikit-learn's score); the transfers
follow fine-tuning tutorials (a deep copy, a head swapped on the pretrained model, a base frozen for feature
extraction, weights loaded into a rebuilt base).  Several make two mistakes at once, as real code does."""
from .answer import Answer

ACCURACY = [
    Answer("accuracy", "tutorial_counts", "image-classification tutorials: torch.max over the logits, running counts",
           """
def evaluate_accuracy(model, batches):
    model.eval()
    correct = 0
    total = 0
    with torch.no_grad():
        for batch in batches:
            outputs = model(batch.inputs, batch.padding_mask)
            _, predicted = torch.max(outputs.data, 1)
            total += batch.targets.size(0)
            correct += (predicted == batch.targets).sum().item()
    return correct / total
""", None),
    Answer("accuracy", "concatenate_then_mean", "learners' repositories: every prediction kept, one mean at the end", """
def evaluate_accuracy(model, batches):
    model.eval()
    predictions, labels = [], []
    with torch.no_grad():
        for batch in batches:
            logits = model(batch.inputs, src_key_padding_mask=batch.padding_mask)
            predictions.append(logits.argmax(dim=-1))
            labels.append(batch.targets)
    return (torch.cat(predictions) == torch.cat(labels)).float().mean().item()
""", None),
    Answer("accuracy", "sklearn_score", "course homework that hands the predictions to scikit-learn", """
from sklearn.metrics import accuracy_score
def evaluate_accuracy(model, batches):
    model.eval()
    y_true, y_pred = [], []
    with torch.no_grad():
        for batch in batches:
            y_pred.extend(model(batch.inputs, batch.padding_mask).argmax(-1).tolist())
            y_true.extend(batch.targets.tolist())
    return accuracy_score(y_true, y_pred)
""", None),
    Answer("accuracy", "percent_at_the_end", "tutorials that print `100 * correct / total` and return it", """
def evaluate_accuracy(model, batches):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for batch in batches:
            predicted = model(batch.inputs, batch.padding_mask).argmax(1)
            total += len(batch.targets)
            correct += (predicted == batch.targets).sum().item()
    return 100 * correct / total
""", "accuracy.percentage"),
    Answer("accuracy", "mean_of_batch_means", "training-loop code that averages each batch's accuracy, left in "
           "training mode", """
def evaluate_accuracy(model, batches):
    accuracies = []
    for batch in batches:
        logits = model(batch.inputs, batch.padding_mask)
        accuracies.append((logits.argmax(-1) == batch.targets).float().mean().item())
    return sum(accuracies) / len(accuracies)
""", ("accuracy.batch_mean", "accuracy.no_eval")),
    Answer("accuracy", "accumulator_without_mask", "an Accumulator-style helper (as in Dive into Deep Learning) that "
           "calls the model on the inputs alone", """
def evaluate_accuracy(net, data_iter):
    net.eval()
    metric = [0.0, 0.0]
    for batch in data_iter:
        y_hat = net(batch.inputs)
        metric[0] += float((y_hat.argmax(axis=1) == batch.targets).sum())
        metric[1] += batch.targets.numel()
    return metric[0] / metric[1]
""", "accuracy.no_padding_mask"),
    Answer("accuracy", "training_helper_reused", "the training loop's accuracy line reused: no eval, no mask", """
def evaluate_accuracy(model, batches):
    hits, seen = 0, 0
    for batch in batches:
        out = model(batch.inputs)
        hits += (out.argmax(dim=1) == batch.targets).sum().item()
        seen += batch.targets.shape[0]
    return hits / seen
""", ("accuracy.no_padding_mask", "accuracy.no_eval")),
    Answer("accuracy", "rounded_percentage", "homework that reports np.round(correct * 100 / total, 3)", """
import numpy as np
def evaluate_accuracy(model, batches):
    model.eval()
    correctly_predicted, total_samples = 0, 0
    with torch.no_grad():
        for batch in batches:
            outputs = model(batch.inputs, batch.padding_mask)
            correctly_predicted += (outputs.argmax(1) == batch.targets).sum().item()
            total_samples += len(batch.targets)
    return float(np.round(correctly_predicted * 100 / total_samples, 3))
""", ("accuracy.percentage", "accuracy.rounded")),
    Answer("accuracy", "count_in_train_mode", "a helper that returns the number right (the caller was to divide), "
           "without eval()", """
def evaluate_accuracy(model, batches):
    correct = torch.tensor(0)
    with torch.no_grad():
        for batch in batches:
            correct += (model(batch.inputs, batch.padding_mask).argmax(-1) == batch.targets).sum()
    return correct.item()
""", ("accuracy.count", "accuracy.no_eval")),
    Answer("accuracy", "two_decimals_per_batch", "per-batch accuracies rounded for a progress line, then weighted", """
def evaluate_accuracy(model, batches):
    model.eval()
    weighted, n = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            acc = round((model(batch.inputs, batch.padding_mask).argmax(-1) == batch.targets).float().mean().item(), 2)
            weighted += acc * len(batch.targets)
            n += len(batch.targets)
    return weighted / n
""", "accuracy.rounded"),
    Answer("accuracy", "attention_mask_convention", "Hugging Face's convention: an attention mask that is 1 at real "
           "tokens, passed where ours is True at padding", """
def evaluate_accuracy(model, batches):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in batches:
            attention_mask = ~batch.padding_mask
            logits = model(batch.inputs, attention_mask)
            correct += (logits.argmax(-1) == batch.targets).sum().item()
            total += batch.targets.numel()
    return correct / total
""", ("accuracy.no_padding_mask", "raised")),
]

TRANSFER = [
    Answer("transfer", "deepcopy_the_base", "fine-tuning tutorials: a deep copy of the pretrained encoder, a new head",
           """
def transfer(pretrained_lm, nclasses):
    encoder = copy.deepcopy(pretrained_lm.base)
    return Model(encoder, ClassificationHead(encoder.nhid, nclasses))
""", None),
    Answer("transfer", "copy_all_swap_head", "a deep copy of the whole model whose head is then replaced", """
def transfer(pretrained_lm, nclasses):
    classifier = copy.deepcopy(pretrained_lm)
    classifier.head = ClassificationHead(classifier.base.nhid, nclasses)
    return classifier
""", None),
    Answer("transfer", "rebuild_and_load", "a base rebuilt from the pretrained one's sizes, its state_dict loaded", """
def transfer(pretrained_lm, nclasses):
    old = pretrained_lm.base
    layer = old.transformer_encoder.layers[0]
    base = TransformerModel(old.encoder.num_embeddings, layer.self_attn.num_heads, old.nhid,
                            len(old.transformer_encoder.layers), dim_feedforward=layer.linear1.out_features)
    base.load_state_dict(old.state_dict())
    return Model(base, ClassificationHead(old.nhid, nclasses))
""", None),
    Answer("transfer", "reuse_the_base_object", "the pretrained base put under a new head as it is (no copy)", """
def transfer(pretrained_lm, nclasses):
    return Model(pretrained_lm.base, ClassificationHead(pretrained_lm.base.nhid, nclasses))
""", "transfer.shared_weights"),
    Answer("transfer", "swap_head_in_place", "the head replaced on the pretrained model itself, as notebooks that "
           "load a model once do", """
def transfer(pretrained_lm, nclasses):
    pretrained_lm.head = ClassificationHead(pretrained_lm.base.nhid, nclasses)
    return pretrained_lm
""", ("transfer.changes_lm", "transfer.shared_weights")),
    Answer("transfer", "feature_extraction", "feature extraction as tutorials teach it: the copied encoder frozen", """
def transfer(pretrained_lm, nclasses):
    base = copy.deepcopy(pretrained_lm.base)
    for param in base.parameters():
        param.requires_grad = False
    return Model(base, ClassificationHead(base.nhid, nclasses))
""", "transfer.frozen"),
    Answer("transfer", "rebuilt_never_loaded", "a base rebuilt from the sizes, its weights never loaded", """
def transfer(pretrained_lm, nclasses):
    old = pretrained_lm.base
    layer = old.transformer_encoder.layers[0]
    base = TransformerModel(old.encoder.num_embeddings, layer.self_attn.num_heads, old.nhid,
                            len(old.transformer_encoder.layers), dim_feedforward=layer.linear1.out_features)
    return Model(base, ClassificationHead(old.nhid, nclasses))
""", "transfer.not_pretrained"),
    Answer("transfer", "probe_on_the_lm_head", "a linear-probe attempt: the whole model copied and frozen, its LM head "
           "kept", """
def transfer(pretrained_lm, nclasses):
    classifier = copy.deepcopy(pretrained_lm)
    for p in classifier.base.parameters():
        p.requires_grad_(False)
    return classifier
""", ("transfer.keeps_lm_head", "transfer.frozen")),
    Answer("transfer", "shared_and_frozen", "the pretrained base frozen in place and reused", """
def transfer(pretrained_lm, nclasses):
    base = pretrained_lm.base
    base.requires_grad_(False)
    return Model(base, ClassificationHead(base.nhid, nclasses))
""", ("transfer.shared_weights", "transfer.frozen")),
]

ANSWERS = [*ACCURACY, *TRANSFER]
