

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
