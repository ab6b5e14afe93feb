"""TextArena games served as multi-turn environments: ``textarena:GAME-ID[?key=value&...]``.

Any id of TextArena's registry (``GuessTheNumber-v0``, ``TowerOfHanoi-v0``,
``TicTacToe-v0``, ...), made with ``textarena.make``. The agent is one seat of the game; the
action is one free-text field, ``action``, passed to the game's ``step`` as it is; the
observation's ``text`` is what the library shows that seat (its prompt, the board after a
move, the game's messages). The reward is 0 until the game ends, then the library's own
reward for the agent's seat (``rewards`` has every seat's).

Options (the rest go to the game's constructor, JSON-typed: ``max_turns=5``):

* ``players``: seats in the game; by default 1 when the game takes one player, else 2.
* ``player``: the agent's seat (default 0); the other seats are played by the opponent.
* ``opponent``: the policy of the other seats: ``random`` (default; a move picked at random
  among the bracketed moves, e.g. ``'[4]'``, of the latest line of its observation that lists
  some), ``MODULE:FUNCTION``, a callable imported from the server's path that takes the
  seat's observation text and returns its move (a class is instantiated first, so TextArena's
  ``Agent`` classes fit), or ``model``: a chat model asked for each move, at
  ``opponent_endpoint`` (any OpenAI-compatible server, through the runtime's ``OpenAIClient``;
  the ``llm`` extra) with ``opponent_model``; its API key, if it needs one, is read from the
  ``OPENENV_OPPONENT_API_KEY`` environment variable, never from the target.

Seeds: ``reset(seed=s)`` gives the game the seed ``s`` as ``env.reset(num_players, seed=s)``
does, and the random opponent a generator seeded with ``s``, so a seeded episode is the same
as the library's own loop with the same seed and moves. TextArena draws from Python's global
``random``; each session keeps its own generator state and swaps it in around the library's
calls (under one lock), so concurrent sessions never disturb each other's draws.
"""

from __future__ import annotations

import importlib
import inspect
import os
import random
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any
from uuid import uuid4

from pydantic import Field

from ..environment import Environment
from ..errors import AdapterError
from ..models import Action, Observation, State
from .options import convert_option
from .target import AdaptedEnvironment

_OWN_OPTIONS = frozenset({"players", "player", "opponent", "opponent_model", "opponent_endpoint"})
# Where an LLM opponent's API key is read from (never from the target, which may be logged).
OPPONENT_KEY_VARIABLE = "OPENENV_OPPONENT_API_KEY"
# Opponent moves in a row before the adapter gives up on a game that never returns the turn.
MAX_OPPONENT_MOVES = 10_000
# A bracketed move such as '[4]' or [move north]; role tags at a line's start are skipped.
_MOVE = re.compile(r"\[[^\[\]\n]{1,64}\]")
_ROLE_TAG = re.compile(r"^\s*\[[^\[\]\n]{1,64}\]\s?")

Policy = Callable[[str], str]


class TextArenaAction(Action):
    """One move, as free text (the game reads what it needs, usually a ``[bracketed]`` move)."""

    action: str = Field(description="The move, as the game expects it, e.g. '[4]'.")


class TextArenaObservation(Observation):
    """What the game shows the agent's seat."""

    text: str = Field(default="", description="The library's observation text for the agent.")
    player_id: int = Field(default=0, description="The agent's seat.")
    turn: int = Field(default=0, description="The game's turn counter.")
    rewards: dict[int, float] | None = Field(
        default=None, description="Every seat's reward, once the game has ended."
    )
    game_info: dict[str, Any] = Field(
        default_factory=dict, description="The library's end-of-game info for the agent's seat."
    )


class TextArenaState(State):
    """The game, its seats, and whether it has ended."""

    game: str = ""
    num_players: int = 1
    player_id: int = 0
    finished: bool = False


_LIBRARY_LOCK = threading.Lock()


class IsolatedRandom:
    """A private state of Python's global ``random``, active only inside ``active()``."""

    def __init__(self) -> None:
        self._state = random.Random().getstate()

    @contextmanager
    def active(self) -> Iterator[None]:
        with _LIBRARY_LOCK:
            saved = random.getstate()
            random.setstate(self._state)
            try:
                yield
            finally:
                self._state = random.getstate()
                random.setstate(saved)


class RandomMoves:
    """The built-in opponent: a random move among those the observation lists."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def __call__(self, observation: str) -> str:
        return self.rng.choice(listed_moves(observation) or ["[0]"])


def listed_moves(observation: str) -> list[str]:
    """The bracketed moves of the latest line that lists any (role tags like ``[GAME]`` left out)."""
    for line in reversed(observation.splitlines()):
        moves = _MOVE.findall(_ROLE_TAG.sub("", line, count=1))
        if moves:
            return list(dict.fromkeys(moves))
    return []


class ModelMoves:
    """An opponent that asks a chat model (any OpenAI-compatible endpoint) for each move.

    The seat's observation text is the user message; the reply is the move. The game runs
    in a worker thread, so each move runs its request on an event loop of its own.
    """

    def __init__(self, model: str, endpoint: str, api_key: str | None) -> None:
        self.model, self.endpoint, self.api_key = model, endpoint, api_key

    def __call__(self, observation: str) -> str:
        import asyncio

        return asyncio.run(self._ask(observation))

    async def _ask(self, observation: str) -> str:
        from ..llm.client import OpenAIClient

        client = OpenAIClient(self.endpoint, None, self.model, api_key=self.api_key)
        return await client.complete(observation)


def resolve_policy(
    spec: str, options: Mapping[str, str] | None = None
) -> Callable[[int | None], Policy]:
    """A maker of opponent policies (given the episode's seed) for the ``opponent`` option."""
    if spec == "random":
        return RandomMoves
    if spec == "model":
        given = options or {}
        model, endpoint = given.get("opponent_model"), given.get("opponent_endpoint")
        if not model or not endpoint:
            raise AdapterError(
                "opponent=model needs opponent_model=NAME and opponent_endpoint=URL (an "
                f"OpenAI-compatible server); its API key, if any, goes in ${OPPONENT_KEY_VARIABLE}."
            )

        moves = ModelMoves(model, endpoint, os.environ.get(OPPONENT_KEY_VARIABLE))
        return lambda _seed: moves
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AdapterError(
            f"opponent={spec!r} is neither 'random', 'model' nor MODULE:FUNCTION (a callable "
            "taking the observation text and returning a move), e.g. opponent=my_agents:greedy."
        )
    try:
        found: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise AdapterError(
            f"opponent={spec!r} cannot be imported ({exc}): check the name."
        ) from None
    policy: Any = found() if inspect.isclass(found) else found
    if not callable(policy):
        raise AdapterError(f"opponent={spec!r} is not callable: give a function of one string.")
    return lambda _seed: policy


class TextArenaEnvironment(Environment[TextArenaAction, TextArenaObservation, TextArenaState]):
    """One session: one game of ``game`` with the agent at seat ``player``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        game: str,
        make_kwargs: Mapping[str, Any],
        num_players: int,
        player: int,
        opponent: Callable[[int | None], Policy],
    ) -> None:
        super().__init__()
        self._game = game
        self._make_kwargs = dict(make_kwargs)
        self._num_players = num_players
        self._player = player
        self._make_opponent = opponent
        self._opponent: Policy | None = None
        self._random = IsolatedRandom()
        self._env: Any = None
        self._done = True
        self._state = TextArenaState(game=game, num_players=num_players, player_id=player)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TextArenaObservation:
        import textarena

        with self._random.active():
            self._env = textarena.make(self._game, **self._make_kwargs)
            self._env.reset(num_players=self._num_players, seed=seed)
        self._opponent = self._make_opponent(seed) if self._num_players > 1 else None
        self._state = TextArenaState(
            episode_id=episode_id or str(uuid4()),
            game=self._game,
            num_players=self._num_players,
            player_id=self._player,
        )
        self._done = False
        return self._advance(done=False)

    def step(self, action: TextArenaAction, **kwargs: Any) -> TextArenaObservation:
        if self._env is None or self._done:
            raise RuntimeError("The game is over (or never started): call reset() first.")
        with self._random.active():
            done, _info = self._env.step(action=action.action)
        self._state.step_count += 1
        return self._advance(done=bool(done))

    def _advance(self, done: bool) -> TextArenaObservation:
        """Play the other seats until it is the agent's turn or the game ends."""
        env = self._env
        for _ in range(MAX_OPPONENT_MOVES):
            if done:
                return self._finish()
            with self._random.active():
                seat, text = env.get_observation()
            if seat == self._player:
                return TextArenaObservation(
                    text=str(text), player_id=self._player, turn=env.state.turn, reward=0.0
                )
            assert self._opponent is not None, "a one-player game gave the turn to another seat"
            move = self._opponent(str(text))
            with self._random.active():
                done, _info = env.step(action=str(move))
        raise RuntimeError(
            f"The other seats made {MAX_OPPONENT_MOVES} moves without returning the turn."
        )

    def _finish(self) -> TextArenaObservation:
        env = self._env
        with self._random.active():
            rewards, game_info = env.close()
            # The agent's last messages (the outcome), read as its own next observation.
            env.state.current_player_id = self._player
            _seat, text = env.get_observation()
        self._done = True
        self._state.finished = True
        all_rewards = {int(k): float(v) for k, v in (rewards or {}).items()}
        info = dict((game_info or {}).get(self._player, {}))
        return TextArenaObservation(
            text=str(text),
            player_id=self._player,
            turn=env.state.turn,
            rewards=all_rewards,
            game_info=info,
            reward=all_rewards.get(self._player, 0.0),
            done=True,
        )

    @property
    def state(self) -> TextArenaState:
        return self._state


def _int_option(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    if raw is None:
        return None
    value: int = convert_option(key, raw, int)
    if value < 0:
        raise AdapterError(f"Option {key}={raw!r} must not be negative.")
    return value


def seats_of(game: str, make_kwargs: Mapping[str, Any]) -> int:
    """How many players ``game`` takes by default: 1 if it accepts one, else 2."""
    import textarena

    probe = IsolatedRandom()
    for players in (1, 2):
        with probe.active():
            env = textarena.make(game, **make_kwargs)
            try:
                env.reset(num_players=players, seed=0)
            except AssertionError:
                continue
        return players
    raise AdapterError(f"{game} takes neither 1 nor 2 players: give players=N.")


def load(name: str, options: Mapping[str, str]) -> AdaptedEnvironment:
    """The TextArena game ``name`` with ``options``, as an environment."""
    import textarena
    from textarena.envs.registration import ENV_REGISTRY

    if name not in ENV_REGISTRY:
        import difflib

        close = difflib.get_close_matches(name, list(ENV_REGISTRY), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise AdapterError(f"TextArena has no game {name!r}.{hint}")
    make_kwargs = {k: convert_option(k, v) for k, v in options.items() if k not in _OWN_OPTIONS}
    try:
        with IsolatedRandom().active():
            textarena.make(name, **make_kwargs)
        players = _int_option(options, "players") or seats_of(name, make_kwargs)
    except AdapterError:
        raise
    except Exception as exc:  # the library's own error: a bad option, a missing data file
        said = " ".join(str(exc).replace("*", " ").split())  # nltk's banners, on one line
        raise AdapterError(f"TextArena could not make {name!r} with {options}: {said}") from None
    player = _int_option(options, "player") or 0
    if player >= players:
        raise AdapterError(f"player={player} is not a seat of a {players}-player game.")
    opponent = resolve_policy(options.get("opponent", "random"), options)
    return AdaptedEnvironment(
        factory=lambda: TextArenaEnvironment(name, make_kwargs, players, player, opponent),
        action_cls=TextArenaAction,
        observation_cls=TextArenaObservation,
        state_cls=TextArenaState,
        name=f"textarena:{name}",
        description=f"TextArena game {name} ({players} player{'s' if players > 1 else ''})",
        package="textarena",
        package_version=version("textarena"),
    )
