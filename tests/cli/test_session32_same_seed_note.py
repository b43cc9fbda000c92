"""A record into a dataset made by a record with the same seed says it repeats its episodes."""

import pytest

from episodes.cli import main


@pytest.mark.parametrize(
    "first,second,said",
    [
        (["--seed", "0"], ["--seed", "0"], "repeats the episodes"),
        (["--seed", "0"], ["--seed", "3"], "keeps the metadata"),
        ([], [], None),  # unseeded: new episodes each time
    ],
    ids=["same seed", "another seed", "no seed"],
)
def test_a_second_record_notes_what_it_repeats(tmp_path, capsys, first, second, said):
    out = str(tmp_path / "rec")
    args = ["record", "CartPole-v1", "--steps", "40", "--num-envs", "2", "--out", out]
    assert main(args + first) == 0
    assert "note:" not in capsys.readouterr().err  # a new dataset: nothing to note
    assert main(args + second) == 0
    err = capsys.readouterr().err
    if said is None:
        assert "note:" not in err
    else:
        assert said in err
