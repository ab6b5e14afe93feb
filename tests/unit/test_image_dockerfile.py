"""openenv_cli.image.dockerfile: --base-image on a Dockerfile (dockerfile-parse underneath)."""

from __future__ import annotations

import pytest

from openenv_cli.image.dockerfile import declares_base_image_arg, dockerfile_stages, set_base_image
from openenv_cli.scaffold import render_project

NEW = "ghcr.io/acme/py:3.12"


# -- set_base_image -------------------------------------------------------------------------


def test_single_stage_literal_from() -> None:
    text = 'FROM python:3.11-slim\nRUN pip install x\nCMD ["x"]\n'
    assert set_base_image(text, NEW) == f'FROM {NEW}\nRUN pip install x\nCMD ["x"]\n'


def test_lowercase_from_and_tag_digest() -> None:
    text = "from python:3.11-slim@sha256:abc\nrun echo hi\n"
    assert set_base_image(text, NEW) == f"from {NEW}\nrun echo hi\n"


def test_arg_based_dockerfile_changes_the_arg_default() -> None:
    text = "# comment\nARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}\nRUN echo $BASE_IMAGE\n"
    assert (
        set_base_image(text, NEW)
        == f"# comment\nARG BASE_IMAGE={NEW}\nFROM ${{BASE_IMAGE}}\nRUN echo $BASE_IMAGE\n"
    )


def test_arg_without_default_or_quoted_or_among_others() -> None:
    assert (
        set_base_image("ARG BASE_IMAGE\nFROM $BASE_IMAGE\n", NEW)
        == f"ARG BASE_IMAGE={NEW}\nFROM $BASE_IMAGE\n"
    )
    assert (
        set_base_image('ARG BASE_IMAGE="python:3.11"\nFROM ${BASE_IMAGE}\n', NEW)
        == f"ARG BASE_IMAGE={NEW}\nFROM ${{BASE_IMAGE}}\n"
    )
    text = "ARG PY=3.11 BASE_IMAGE=python:3.11 BASE_IMAGE_TAG=x\nFROM ${BASE_IMAGE}\n"
    assert (
        set_base_image(text, NEW)
        == f"ARG PY=3.11 BASE_IMAGE={NEW} BASE_IMAGE_TAG=x\nFROM ${{BASE_IMAGE}}\n"
    )


def test_arg_path_also_moves_literal_froms_of_the_old_default() -> None:
    text = (
        "ARG BASE_IMAGE=python:3.11-slim\n"
        "FROM ${BASE_IMAGE} AS builder\nRUN build\n"
        "FROM python:3.11-slim\nCOPY --from=builder /w /w\n"
    )
    assert set_base_image(text, NEW) == (
        f"ARG BASE_IMAGE={NEW}\nFROM ${{BASE_IMAGE}} AS builder\nRUN build\nFROM {NEW}\nCOPY --from=builder /w /w\n"
    )


def test_unused_global_arg_falls_back_to_the_from_lines() -> None:
    text = "ARG BASE_IMAGE=python:3.11\nFROM python:3.11-slim\n"
    assert set_base_image(text, NEW) == f"ARG BASE_IMAGE=python:3.11\nFROM {NEW}\n"


def test_the_template_dockerfile() -> None:
    text = render_project("my_env")["server/Dockerfile"]
    out = set_base_image(text, NEW)
    assert f"ARG BASE_IMAGE={NEW}\n" in out
    assert "FROM ${BASE_IMAGE}\n" in out
    assert out.replace(NEW, "python:3.11-slim") == text


def test_multi_stage_builder_and_final_on_the_same_base() -> None:
    text = (
        "FROM python:3.11-slim AS builder\n"
        "RUN pip wheel . -w /wheels\n"
        "FROM python:3.11-slim\n"
        "COPY --from=builder /wheels /wheels\n"
    )
    assert set_base_image(text, NEW) == (
        f"FROM {NEW} AS builder\nRUN pip wheel . -w /wheels\nFROM {NEW}\nCOPY --from=builder /wheels /wheels\n"
    )


def test_stage_from_another_image_is_left_alone_whatever_its_position() -> None:
    text = (
        "FROM node:20 AS ui\nRUN npm ci && npm run build\n"
        "FROM python:3.11-slim AS base\nRUN pip install uv\n"
        "FROM base AS final\n"
        "COPY --from=ui /app/dist /static\n"
    )
    out = set_base_image(text, NEW)
    assert out == text.replace("FROM python:3.11-slim AS base", f"FROM {NEW} AS base")
    assert "FROM node:20 AS ui" in out and "FROM base AS final" in out and "COPY --from=ui" in out


def test_from_naming_an_earlier_stage_is_never_rewritten() -> None:
    text = "FROM python:3.11 AS builder\nRUN make\nFROM builder\nRUN test\nFROM BUILDER AS again\n"
    assert (
        set_base_image(text, NEW)
        == f"FROM {NEW} AS builder\nRUN make\nFROM builder\nRUN test\nFROM BUILDER AS again\n"
    )


def test_platform_flag_and_alias_are_kept() -> None:
    text = "FROM --platform=$BUILDPLATFORM python:3.11-slim AS x\nRUN true\nFROM --platform=linux/amd64 python:3.11-slim\n"
    assert set_base_image(text, NEW) == (
        f"FROM --platform=$BUILDPLATFORM {NEW} AS x\nRUN true\nFROM --platform=linux/amd64 {NEW}\n"
    )


def test_continuation_lines_and_comments() -> None:
    text = "# FROM python:3.11 in a comment\nFROM \\\n    python:3.11-slim \\\n    AS app\nRUN echo FROM python:3.11-slim\n"
    out = set_base_image(text, NEW)
    assert (
        out
        == f"# FROM python:3.11 in a comment\nFROM \\\n    {NEW} \\\n    AS app\nRUN echo FROM python:3.11-slim\n"
    )


def test_heredoc_without_from_lines_is_fine() -> None:
    # dockerfile-parse does not know heredocs: a body line starting with FROM would be taken
    # for an instruction (documented limit); bodies without one are read correctly.
    text = 'FROM python:3.11-slim\nRUN <<EOF\necho hi\nEOF\nCMD ["x"]\n'
    out = set_base_image(text, NEW)
    assert out == text.replace("python:3.11-slim", NEW)


def test_declares_base_image_arg() -> None:
    assert declares_base_image_arg(render_project("my_env")["server/Dockerfile"])
    assert declares_base_image_arg("ARG BASE_IMAGE\nFROM $BASE_IMAGE AS x\n")
    assert declares_base_image_arg("  arg BASE_IMAGE\nFROM $BASE_IMAGE\n")
    assert not declares_base_image_arg("FROM python:3.11-slim\nARG BASE_IMAGES=1\n")
    assert not declares_base_image_arg("FROM python:3.11\nARG BASE_IMAGE=x\n")  # not global
    assert not declares_base_image_arg("ARG BASE_IMAGE=x\nFROM python:3.11\n")  # unused
    assert not declares_base_image_arg("ARG BASE_IMAGE_TAG=x\nFROM python:$BASE_IMAGE_TAG\n")


def test_final_stage_on_scratch_uses_the_first_external_image() -> None:
    text = "FROM golang:1.22 AS build\nRUN go build\nFROM scratch\nCOPY --from=build /app /app\n"
    assert set_base_image(text, NEW) == text.replace("golang:1.22", NEW)


def test_escape_directive() -> None:
    text = "# escape=`\nFROM `\n  python:3.11-slim\nRUN dir\n"
    assert set_base_image(text, NEW) == f"# escape=`\nFROM `\n  {NEW}\nRUN dir\n"


def test_crlf_line_endings_survive() -> None:
    text = "FROM python:3.11-slim AS a\r\nRUN x\r\n"
    assert set_base_image(text, NEW) == f"FROM {NEW} AS a\r\nRUN x\r\n"


@pytest.mark.parametrize("bad", ["", "  ", "two words"])
def test_bad_image_reference(bad: str) -> None:
    with pytest.raises(ValueError, match="not an image reference"):
        set_base_image("FROM python:3.11\n", bad)


def test_no_from() -> None:
    with pytest.raises(ValueError, match="no FROM"):
        set_base_image("# nothing\nRUN true\n", NEW)


def test_dockerfile_stages() -> None:
    stages = dockerfile_stages("FROM a:1 AS one\nFROM --platform=x b\nfrom one as Two\n")
    assert [(s.image, s.name, s.first_line) for s in stages] == [
        ("a:1", "one", 0),
        ("b", None, 1),
        ("one", "Two", 2),
    ]
