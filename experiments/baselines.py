"""Bag-of-words baselines: the bar a sentence classifier has to clear to be worth its cost.

Multinomial naive Bayes and logistic regression (scikit-learn) on word n-gram counts.  Their
hyperparameters (smoothing ``alpha``, inverse regularisation ``C``, n-gram range) are chosen on
the validation set only, exactly like the Transformers' recipe; the test set is scored once.
"""
from __future__ import annotations

from itertools import product

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB

# Small grids: enough to be fair to the baselines, small enough to run in a second or two.
NGRAMS = ((1, 1), (1, 2))
NB_ALPHAS = (0.1, 0.3, 1.0, 3.0)
LR_CS = (0.1, 0.3, 1.0, 3.0, 10.0)


def _vectorizer(ngram_range: tuple[int, int]) -> CountVectorizer:
    # The texts are already normalized and space-tokenized (``translab.data.normalize``):
    # split on whitespace, keep punctuation tokens such as "!" that carry sentiment.
    return CountVectorizer(ngram_range=ngram_range, token_pattern=r"\S+", lowercase=True)


def _model(kind: str, value: float):
    if kind == "naive_bayes":
        return MultinomialNB(alpha=value)
    if kind == "logistic_regression":
        return LogisticRegression(C=value, solver="liblinear")
    raise ValueError(f"unknown baseline {kind!r}; choose naive_bayes or logistic_regression")


def fit_baseline(kind: str, train: list[tuple[str, int]], valid: list[tuple[str, int]],
                 test: list[tuple[str, int]]) -> dict:
    """Pick (n-gram range, hyperparameter) on ``valid``, report accuracy on ``test`` once."""
    if not train or not valid or not test:
        raise ValueError("train, valid and test must all be non-empty")
    grid = NB_ALPHAS if kind == "naive_bayes" else LR_CS
    y_train = np.array([label for _, label in train])
    best = None
    for ngram_range, value in product(NGRAMS, grid):
        vectorizer = _vectorizer(ngram_range)
        x_train = vectorizer.fit_transform([text for text, _ in train])
        model = _model(kind, value).fit(x_train, y_train)
        valid_acc = _accuracy(model, vectorizer, valid)
        if best is None or valid_acc > best["valid_accuracy"]:
            best = {"valid_accuracy": valid_acc, "ngram_range": list(ngram_range),
                    "hyperparameter": value, "model": model, "vectorizer": vectorizer}
    test_acc = _accuracy(best.pop("model"), best.pop("vectorizer"), test)
    name = "alpha" if kind == "naive_bayes" else "C"
    return {"test_accuracy": test_acc, "valid_accuracy": best["valid_accuracy"],
            "ngram_range": best["ngram_range"], name: best["hyperparameter"]}


def _accuracy(model, vectorizer, pairs: list[tuple[str, int]]) -> float:
    predictions = model.predict(vectorizer.transform([text for text, _ in pairs]))
    return float(np.mean(predictions == np.array([label for _, label in pairs])))


def default_baseline(kind: str, train: list[tuple[str, int]], test: list[tuple[str, int]]) -> dict:
    """scikit-learn's defaults, untuned (``CountVectorizer()``, alpha=1 / C=1): the issue's reference numbers."""
    vectorizer = CountVectorizer()
    model = (MultinomialNB() if kind == "naive_bayes" else LogisticRegression(solver="liblinear"))
    model.fit(vectorizer.fit_transform([text for text, _ in train]), np.array([label for _, label in train]))
    return {"test_accuracy": _accuracy(model, vectorizer, test)}


def all_baselines(train, valid, test) -> dict:
    """Both baselines, tuned on ``valid`` (the headline numbers) and with plain defaults."""
    return {kind: {**fit_baseline(kind, train, valid, test),
                   "default_test_accuracy": default_baseline(kind, train, test)["test_accuracy"]}
            for kind in ("naive_bayes", "logistic_regression")}


PROBE_CS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)  # unit-length sentence embeddings need weaker regularisation


def fit_feature_probe(train: tuple[np.ndarray, np.ndarray], valid: tuple[np.ndarray, np.ndarray],
                      test: tuple[np.ndarray, np.ndarray]) -> dict:
    """Logistic regression on frozen features ((x, y) per split): ``C`` chosen on ``valid``, ``test`` scored once.
    What a pretrained encoder knows before any fine-tuning."""
    best = None
    for c in PROBE_CS:
        model = LogisticRegression(C=c, max_iter=2000).fit(*train)
        valid_acc = float(np.mean(model.predict(valid[0]) == valid[1]))
        if best is None or valid_acc > best[0]:
            best = (valid_acc, c, model)
    valid_acc, c, model = best
    return {"test_accuracy": float(np.mean(model.predict(test[0]) == test[1])), "valid_accuracy": valid_acc, "C": c}
