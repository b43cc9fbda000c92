"""The CLI's "install the extra" errors say why an installed extra failed to import."""

import argparse
import sys

import pytest

from episodes.cli import main
from episodes.cli.errors import CliError
from episodes.cli.plotting import plot


class _Broken:
    """An import hook that makes ``name`` fail to import as a broken install does."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name or fullname.startswith(self.name + "."):
            raise ImportError(f"{self.name} is broken here: _ARRAY_API not found")
        return None


@pytest.fixture
def broken(monkeypatch):
    def make(name: str) -> None:
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, module)
        monkeypatch.setattr(sys, "meta_path", [_Broken(name), *sys.meta_path])

    return make


def test_plot_names_the_import_error(broken, tmp_path):
    broken("matplotlib")
    with pytest.raises(CliError, match=r"episodes\[plot\].*_ARRAY_API not found"):
        plot(argparse.Namespace(dir=str(tmp_path), out=str(tmp_path / "p.png")))


def test_minari_commands_name_the_import_error(broken, tmp_path, capsys):
    broken("minari")
    code = main(["import", "minari", "x/y-v0", "--out", str(tmp_path / "d")])
    assert code != 0
    assert "_ARRAY_API not found" in capsys.readouterr().err
