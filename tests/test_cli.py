"""The command line's argument handling (python -m convlab demo|explain|bench)."""
import pytest

from convlab.cli import main as cli


@pytest.mark.parametrize("argv", [["demo", "--threads=--"], ["explain", "ic1oc1iw4kw1", "--mb=--"],
                                  ["bench", "--mb=--"], ["bench", "--threads=--"]])
def test_an_option_without_its_value_is_a_usage_error(argv, capsys):
    # argparse before Python 3.12 reads "--option=--" as an empty list
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "expected one argument" in capsys.readouterr().err


def test_explain_refuses_sizes_beyond_what_convlab_computes(capsys):
    assert cli.main(["explain", "ic1oc1iw99999999999999999999kw1"]) == 2
    assert "error: descriptor:" in capsys.readouterr().out


def test_threads_beyond_a_c_int_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["explain", "ic1oc1iw4kw1", "--threads", str(2**40)])
    assert exit_info.value.code == 2
    assert "--threads" in capsys.readouterr().err
