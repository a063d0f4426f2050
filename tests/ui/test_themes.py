"""Theme files: the shipped ones load, bad ones get one clear line, names resolve."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.ui.themes import (
    ThemeError,
    packaged_themes,
    parse_theme,
    resolve_theme,
    skipped_themes,
    theme_names,
    user_themes,
)


def test_packaged_themes_load_with_gauge_variables() -> None:
    themes = packaged_themes()
    assert {"gputui-dark", "gputui-light", "gputui-high-contrast"} <= set(themes)
    assert themes["gputui-light"].dark is False
    for theme in themes.values():
        assert {"gauge-low", "gauge-mid", "gauge-high", "gauge-mem", "gauge-empty"} <= set(
            theme.variables
        )


def test_theme_names_list_gputui_first_then_user_then_textual(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("name: mine\nprimary: '#123456'\n")
    names = theme_names(tmp_path)
    assert names[:3] == ["gputui-dark", "gputui-high-contrast", "gputui-light"]
    assert names[3] == "mine"
    assert "textual-dark" in names


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("name: x\n", "t.yaml: primary: required"),
        ("primary: '#fff'\n", "t.yaml: name: required"),
        ("name: x\nprimary: '#fff'\ncolour: red\n", "t.yaml: colour: unknown key"),
        ("name: x\nprimary: bluish\n", "t.yaml: primary: 'bluish' is not a colour"),
        ("name: x\nprimary: '#fff'\ndark: maybe\n", "t.yaml: dark: must be true or false"),
        (
            "name: x\nprimary: '#fff'\nvariables: {gauge-low: nope}\n",
            "t.yaml: variables.gauge-low: 'nope' is not a colour",
        ),
        (
            "name: x\nprimary: '#fff'\n"
            'variables: {block-cursor-background: "not a colour ;;; }"}\n',
            "t.yaml: variables.block-cursor-background: 'not a colour ;;; }' is not a colour",
        ),
        (
            "name: x\nprimary: '#fff'\nvariables: {footer-background: '$primary 30%'}\n",
            "t.yaml: variables.footer-background: '$primary 30%' is not a colour",
        ),
        (
            "name: x\nprimary: '#fff'\nvariables: {block-cursor-text-style: blinky}\n",
            "t.yaml: variables.block-cursor-text-style: 'blinky' is not a text style",
        ),
        (
            "name: x\nprimary: '#fff'\nvariables: {'a b': '#fff'}\n",
            "t.yaml: variables.a b: not a variable name",
        ),
        ("name: x\nprimary: [\n", "t.yaml:3: yaml:"),
        ("- a\n", "t.yaml: (top level): must be a mapping"),
    ],
)
def test_bad_theme_is_one_line_naming_file_and_field(text: str, error: str) -> None:
    with pytest.raises(ThemeError) as caught:
        parse_theme(text, "t.yaml")
    message = str(caught.value)
    assert message.startswith(error)
    assert "\n" not in message


def test_textual_variables_that_textual_accepts_are_kept() -> None:
    theme = parse_theme(
        "name: x\nprimary: '#fff'\nvariables:\n"
        "  block-cursor-background: '#81a1c1 35%'\n"
        "  block-cursor-text-style: b reverse\n"
        "  footer-key-foreground: ansi_blue\n"
        "  link-style: bold not underline\n",
        "t.yaml",
    )
    assert theme.variables["block-cursor-text-style"] == "b reverse"
    assert theme.variables["block-cursor-background"] == "#81a1c1 35%"


def test_user_theme_errors_are_collected_not_raised(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("name: good\nprimary: '#123456'\n")
    (tmp_path / "bad.yaml").write_text("name: bad\n")
    (tmp_path / "file.yaml").write_text("name: ugly\nprimary: '#fff'\nvariables: {x: 'a;}'}\n")
    themes, errors = user_themes(tmp_path)
    assert list(themes) == ["good"]
    assert [str(e) for e in errors] == [
        f"{tmp_path / 'bad.yaml'}: primary: required",
        f"{tmp_path / 'file.yaml'}: variables.x: 'a;}}' is not a colour",
    ]
    assert [e.theme for e in errors] == ["bad", "ugly"]  # the name, else the file's stem
    assert set(skipped_themes(tmp_path)) == {"bad", "ugly"}


def test_user_themes_come_from_home_config(isolated_home: Path) -> None:
    directory = isolated_home / ".config" / "gputui" / "themes"
    directory.mkdir(parents=True)
    (directory / "ocean.yaml").write_text("name: ocean\nprimary: '#0077be'\n")
    assert "ocean" in theme_names()


def test_unknown_theme_lists_known_names() -> None:
    assert resolve_theme("a", ["a", "b"]) == "a"
    with pytest.raises(ValueError, match=r"^unknown theme 'c'; known themes: a, b$"):
        resolve_theme("c", ["a", "b"])
