

def test_help_lists_every_command_in_plain_text_and_each_command_says_what_it_does(capsys) -> None:
    from shopsim_metrics.cli import build_parser

    parser = build_parser()
    text = parser.format_help()
    commands = ("inspect", "demo", "tune", "dashboard", "check-config", "prompts", "preflight")
    description = text.split("positional arguments")[0]
    assert all(c in description for c in commands) and "``" not in text
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in commands:
        own = sub.choices[name].format_help()
        assert sub.choices[name].description, name
        assert "``" not in own, name
    assert "train.py" in sub.choices["preflight"].description


def test_a_missing_subcommand_is_named_by_its_choices(capsys) -> None:
    import pytest

    from shopsim_metrics.cli import main

    for argv, choices in (([], "{inspect,demo,tune,replay,"), (["dashboard"], "{html,wandb,spec}")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and "_command" not in err and " command " not in err
        assert f"error: the following arguments are required: {choices}" in err


def test_a_directory_above_the_run_names_the_run_directory_below_it(tmp_path, capsys) -> None:
    from shopsim_metrics.cli import main
    from shopsim_metrics.sinks import JsonlSink
    from shopsim_metrics.record.records import StepRecord

    sink = JsonlSink(tmp_path / "demo_out" / "run", fsync=False)
    sink.emit(StepRecord(rollout_id=0))
    sink.close()
    (tmp_path / "demo_out" / "other").mkdir()
    for command in (["inspect"], ["dashboard", "html", "--out", str(tmp_path / "x.html")], ["prompts"]):
        assert main([*command, str(tmp_path / "demo_out")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"did you mean {tmp_path / 'demo_out' / 'run'}?" in err, command
    assert main(["inspect", str(tmp_path / "demo_out" / "other")]) == 2
    assert "did you mean" not in capsys.readouterr().err
