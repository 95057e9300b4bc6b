import pytest

from translab import data


@pytest.fixture(scope="session")
def tokenizer():
    return data.load_tokenizer()


@pytest.fixture(scope="session")
def prepared():
    """The statistics of the prepared data; fails with the fix when `make data` has not run."""
    stats_path = data.processed_dir() / "stats.json"
    if not stats_path.exists():
        pytest.fail(f"{stats_path} is missing: run `make setup` before `make test`")
    import json
    return json.loads(stats_path.read_text())
