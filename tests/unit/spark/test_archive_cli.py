"""skiff export and replay refuse bad arguments before starting Spark (exit 2, the reason said)."""

import pytest

from skiff.cli.main import main

pytestmark = pytest.mark.spark


def test_a_range_that_ends_before_it_starts_is_refused(capsys):
    assert main(["export", "-t", "T", "-o", "out", "--from", "2000", "--to", "1000"]) == 2
    assert "--to (1000) must be after --from (2000)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["export", "-t", "T", "-o", "out", "--from", "yesterday-ish"], "is not ms since the epoch"),
    (["replay", "-i", "in", "-t", "T"], "--write-id"),
])
def test_bad_arguments_name_the_option(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and words in capsys.readouterr().err
