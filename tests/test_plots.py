"""The figures of part 1's demos, drawn as the notebook draws them.  Grading leaves those cells out (grader.course.demos),
so a plot that broke would reach students unseen: each figure here is rendered, and what it shows is checked."""
from __future__ import annotations

import base64
import math
from html.parser import HTMLParser

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from translab import plots  # noqa: E402
from translab.attention import scaling_demo  # noqa: E402


def _mask(size: int) -> torch.Tensor:
    return torch.triu(torch.full((size, size), float("-inf")), diagonal=1)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _rendered(ax) -> None:
    ax.figure.canvas.draw()  # what the inline backend does before it saves the PNG


def test_the_mask_plot_labels_every_cell_of_a_small_mask():
    ax = plots.plot_mask(_mask(4))
    _rendered(ax)
    labels = [text.get_text() for text in ax.texts]
    assert labels.count("-inf") == 6 and labels.count("0") == 10
    assert np.array_equal(ax.images[0].get_array(), np.where(np.isneginf(_mask(4).numpy()), -1.0, 0.0))


def test_the_attention_plot_shows_the_weights_with_their_tokens():
    weights = torch.softmax(torch.randn(5, 5) + _mask(5), dim=-1)
    ax = plots.plot_attention(weights, tokens=list("abcde"), title="with the causal mask")
    _rendered(ax)
    assert np.allclose(ax.images[0].get_array(), weights.numpy())
    assert [label.get_text() for label in ax.get_xticklabels()] == list("abcde")
    assert ax.get_title() == "with the causal mask"


def test_the_encoding_plots_show_the_table_and_the_chosen_dimensions():
    position = torch.arange(20).unsqueeze(1)
    table = torch.cat([torch.sin(position / 10 ** (i / 4)) for i in range(8)], dim=1)
    heatmap = plots.plot_positional_encoding(table)
    curves = plots.plot_encoding_dimensions(table, dims=(0, 1, 16))  # 16 is past the table: left out
    _rendered(heatmap)
    _rendered(curves)
    assert np.allclose(heatmap.images[0].get_array(), table.numpy())
    assert [line.get_label() for line in curves.get_lines()] == ["dim 0 (sin)", "dim 1 (cos)"]


def test_the_scaling_plot_draws_both_scores_at_every_width():
    rows = scaling_demo(dims=(4, 64), keys=8, queries=50, seed=0)
    axes = plots.plot_attention_scaling(rows)
    _rendered(axes[0])
    raw, scaled = axes[0].get_lines()
    assert list(raw.get_xdata()) == [4, 64]
    assert np.allclose(scaled.get_ydata(), [row["spread_scaled"] for row in rows])
    assert raw.get_ydata()[1] > 3 * scaled.get_ydata()[1]  # sqrt(64) = 8: the division is what the plot shows
    assert all(0 <= value <= 1 for value in axes[1].get_lines()[1].get_ydata())
    assert math.isclose(axes[1].get_ylim()[1], 1.05)


def test_one_map_per_head():
    weights = torch.softmax(torch.randn(3, 4, 4), dim=-1)
    axes = plots.plot_attention_heads(weights, title="layer 0")
    _rendered(axes[0])
    assert [ax.get_title() for ax in axes] == ["layer 0 head 0", "layer 0 head 1", "layer 0 head 2"]


# ----------------------------------------------------------------- what each figure says in words (issue 55)

def test_each_figure_says_in_words_what_its_data_shows(capsys):
    mask_ax = plots.plot_mask(_mask(5))
    assert "5 x 5, 0 on and below the diagonal, -inf above it" in plots.summary(mask_ax)
    not_causal = plots.plot_mask(torch.zeros(3, 3))
    assert "0 of 9 entries -inf" in plots.summary(not_causal)
    weights = torch.softmax(torch.tensor([[5.0, 0, 0], [0, 5, 0], [5, 0, 0]]) + _mask(3), dim=-1)
    attention = plots.plot_attention(weights, tokens=["a", "b", "c"], title="t")
    assert "no weight on later keys" in plots.summary(attention) and "largest weight is on key a, b, a" in \
        plots.summary(attention)
    losses = [4.0, 3.0, 2.5, 2.0, 1.0]
    loss_ax = plots.plot_loss_curve(losses, window=2, title="run")
    assert "4.00 at step 1 and 1.00 at step 5" in plots.summary(loss_ax) and "lowest 1.50" in plots.summary(loss_ax)
    history = {"epoch": [1, 2, 3], "valid_accuracy": [0.55, 0.71, 0.64], "best_epoch": 2}
    curves = plots.plot_accuracy_curves({"pretrained": history}, second_key=None, title="acc")
    assert "highest 71.0% after epoch 2, kept epoch 2" in plots.summary(curves)
    epoch_losses = plots.plot_epoch_losses({"pretrained": {"epoch": [1, 2, 3], "train_loss": [0.69, 0.41, 0.45]}})
    assert "0.690 after epoch 1, 0.450 after epoch 3 (lowest 0.410, epoch 2)" in plots.summary(epoch_losses)
    rows = scaling_demo(dims=(4, 256), seed=0)
    axes = plots.plot_attention_scaling(rows)
    assert f"{rows[-1]['spread_raw']:.2f} as q.k" in plots.summary(axes)
    printed = capsys.readouterr().out
    assert plots.summary(loss_ax) in printed and plots.summary(mask_ax) in printed  # under the figure, for everyone


def _series(ax) -> list:
    return [line for line in ax.get_lines() if len(line.get_xdata()) > 2]  # curves, not reference lines


@pytest.mark.parametrize("draw", ["scaling", "dimensions", "loss", "accuracy", "epoch losses"])
def test_no_two_series_differ_by_colour_alone(draw):
    history = {"epoch": [1, 2, 3], "valid_accuracy": [0.5, 0.6, 0.7], "test_accuracy": [0.5, 0.55, 0.6]}
    table = torch.sin(torch.arange(30.0).unsqueeze(1) / torch.tensor([1.0, 3.0, 9.0, 27.0]))
    made = {"scaling": lambda: plots.plot_attention_scaling(scaling_demo(dims=(4, 16, 64), seed=0))[0],
            "dimensions": lambda: plots.plot_encoding_dimensions(table, dims=(0, 1, 2, 3)),
            "loss": lambda: plots.plot_loss_curve([3.0, 2.5, 2.0, 1.5, 1.2], window=2),
            "accuracy": lambda: plots.plot_accuracy_curves({"pretrained": history, "scratch": history}),
            "epoch losses": lambda: plots.plot_epoch_losses({name: {"epoch": [1, 2, 3], "train_loss": [0.7, 0.5, 0.4]}
                                                             for name in ("pretrained", "scratch")})}[draw]()
    lines = _series(made)
    assert len(lines) >= 2
    looks = [(line.get_marker(), line.get_linestyle()) for line in lines]
    assert len(set(looks)) == len(looks), looks
    assert all(matplotlib.colors.to_hex(line.get_color()).upper() in plots.PALETTE for line in lines)


class _Images(HTMLParser):
    """The attributes of each ``<img>`` of a page, their character references decoded (as a browser reads them)."""

    def __init__(self, page: str):
        super().__init__()
        self.found: list[dict] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.found.append(dict(attrs))


def test_in_a_notebook_the_image_carries_its_words_as_alt():
    """In JupyterLab and on the feedback page alike (both show text/html before image/png): one ``<img>``, the
    figure's PNG, with its words as alt, quotes and brackets of a title included."""
    ax = plots.plot_loss_curve([2.0, 1.0, 0.5], window=2, title='run "<b>" & co')
    data, metadata = plots.figure_output(ax.figure)
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    assert metadata == {"image/png": {"alt": plots.summary(ax)}}
    assert _Images(data["text/html"]).found == [{"src": f"data:image/png;base64,{data['image/png']}",
                                                 "alt": plots.summary(ax)}]
    import nbformat
    from nbconvert import HTMLExporter

    from grader.nbgrader_plugins.sanitize_student_content import SanitizeStudentContent
    cell = nbformat.v4.new_code_cell("plots.plot_loss_curve(losses)", outputs=[nbformat.v4.new_output(
        "display_data", data=data, metadata=metadata)])
    notebook, _ = SanitizeStudentContent().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    page, _ = HTMLExporter(template_name="classic").from_notebook_node(notebook)
    assert [image["alt"] for image in _Images(page).found] == [plots.summary(ax)]


def test_a_figure_that_says_nothing_is_its_png_alone():
    _, ax = plt.subplots()
    ax.plot([1, 2, 3])
    data, metadata = plots.figure_output(ax.figure)
    assert set(data) == {"image/png"} and metadata == {}


def test_no_two_models_look_alike_but_for_colour():
    looks = [(style["marker"], style["linestyle"]) for style in plots.MODEL_STYLES.values()]
    assert len(set(looks)) == len(looks) and len({marker for marker, _ in looks}) == len(looks)


def _assert_no_data_point_under_a_legend(figure) -> None:
    figure.canvas.draw()
    for ax in figure.axes:
        if ax.get_legend() is None:
            continue
        box = ax.get_legend().get_window_extent().transformed(ax.transData.inverted())  # in data coordinates
        for line in ax.get_lines():
            under = [(x, y) for x, y in line.get_xydata() if box.contains(x, y)]
            assert not under, (ax.get_title(), line.get_label(), under)


def _looks(ax) -> dict:
    """{label: (marker, line style)} of what ``ax``'s legend lists (an error bar's look is its data line's)."""
    handles, labels = ax.get_legend_handles_labels()
    lines = [handle[0] if isinstance(handle, ErrorbarContainer) else handle for handle in handles]
    return {label: (line.get_marker(), line.get_linestyle()) for line, label in zip(lines, labels)}


def _below_the_axis(ax) -> bool:
    """Whether ``ax``'s legend lies under its tick labels and x label."""
    renderer = ax.figure.canvas.get_renderer()
    return ax.get_legend().get_window_extent(renderer).y1 <= ax.xaxis.get_tightbbox(renderer).y0


def test_transfer_png_tells_every_series_apart_without_colour():
    """results/transfer.png as ``python -m experiments.transfer --replot`` draws it from the shipped results."""
    from experiments import transfer
    from translab.paths import RESULTS_DIR
    figure = transfer.draw(plots.load_results(RESULTS_DIR / "transfer.json"))
    left, right = figure.axes
    for ax in (left, right):
        assert len(set(_looks(ax).values())) == len(_looks(ax)), _looks(ax)
    assert {"naive Bayes (BoW)", "logistic regression (BoW)", "MiniLM frozen + log. regression"} <= set(_looks(left))
    _assert_no_data_point_under_a_legend(figure)
    assert _below_the_axis(left)


def test_part_6_s_legends_cover_no_data():
    """Part 6's figure as the notebook draws it (then ``plt.tight_layout()``), with the shipped results and the
    maintainers' seed-0 run as the student's."""
    from translab.paths import RESULTS_DIR
    results = plots.load_results(RESULTS_DIR / "transfer.json")
    reference = plots.load_results(RESULTS_DIR / "bert_finetune.json")
    left, right = plots.plot_bert_beside_part4(reference["runs"][0], 400, results, reference["runs"])
    plt.tight_layout()
    _assert_no_data_point_under_a_legend(left.figure)
    assert _below_the_axis(left) and _below_the_axis(right)
    for ax in (left, right):
        assert len(set(_looks(ax).values())) == len(_looks(ax)), _looks(ax)
    assert len(_looks(left)) == 7  # part 4's three models, the full experiment's BERT, its seeds, yours, chance


@pytest.mark.slow  # starts a kernel
def test_a_figure_drawn_in_a_kernel_keeps_its_words_in_the_notebook():
    """The inline backend sets its own PNG formatter when it draws the first figure; the figure's words must still
    reach the saved output, as the image's alt and as text under the cell."""
    import nbformat
    from nbclient import NotebookClient
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from translab import plots\nplots.plot_loss_curve([3.0, 2.0, 1.0], window=2, title='run');")])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    said = next(output.text for output in outputs if output.output_type == "stream").strip()
    image = next(output for output in outputs if output.output_type == "display_data")
    assert said.startswith("run: loss 3.00 at step 1") and image.metadata["image/png"]["alt"] == said
    assert [found["alt"] for found in _Images(image.data["text/html"]).found] == [said]
    assert len([output for output in outputs if output.output_type == "display_data"]) == 1


def test_a_shipped_png_is_shown_with_words_read_from_its_results(monkeypatch):
    """Part 4 shows results/transfer.png as a file: its ``<img>`` has an alt that names the sizes and seeds of
    the results it was drawn from (IPython's ``Image`` would show it with none in JupyterLab)."""
    import builtins
    from types import SimpleNamespace

    from translab.paths import RESULTS_DIR
    results = plots.load_results(RESULTS_DIR / "transfer.json")
    shown = []
    shell = SimpleNamespace(display_pub=SimpleNamespace(publish=lambda data, metadata: shown.append((data, metadata))))
    monkeypatch.setattr(builtins, "get_ipython", lambda: shell, raising=False)
    alt = plots.transfer_png_alt(results)
    plots.show_png(RESULTS_DIR / "transfer.png", alt=alt)
    (data, metadata), = shown
    assert metadata == {"image/png": {"alt": alt}}
    assert [image["alt"] for image in _Images(data["text/html"]).found] == [alt]
    assert base64.b64decode(data["image/png"]) == (RESULTS_DIR / "transfer.png").read_bytes()
    assert f"over {len(results['seeds'])} seeds" in alt
    assert all(str(row["n_train"]) in alt for row in results["learning_curve"])
