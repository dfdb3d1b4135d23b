"""A simulation of a proposed pydantic-ai change, for the overhead benchmark only: cheaper tool-hook dispatch.

pydantic-ai 2.68 dispatches every tool hook to every capability, overridden or not, and copies the `RunContext`
for each one through `copy.copy`'s generic `__reduce_ex__` path. The proposal: dispatch a tool hook only to
the capabilities whose class overrides it, and copy the context by its `__dict__`. Behaviour is unchanged (a
hook a capability does not override is the identity), so only the cost moves. pydantic-ai already gates other
hooks this way (`_has_wrap_node_run`, `_has_wrap_model_request`, `has_wrap_run_event_stream` in
`capabilities/abstract.py` compare the class's method with `AbstractCapability`'s); the proposal extends that to
the six tool hooks.

`proposed_tool_hook_dispatch()` patches `CombinedCapability` and `RunContext` for the duration of a `with`
block and restores them after. Nothing outside `bench/` imports this module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, CombinedCapability, combined as _combined

_PLAIN_HOOKS = ('before_tool_validate', 'after_tool_validate', 'before_tool_execute', 'after_tool_execute')
"""Hooks that thread one value (`args`, or `result` for `after_tool_execute`) through the capabilities."""

_WRAP_HOOKS = ('wrap_tool_validate', 'wrap_tool_execute')
"""Hooks that nest the capabilities around a handler."""

_ctx_for_active_cap: Callable[..., Any] = getattr(_combined, '_ctx_for_active_cap')  # noqa: B009 - private helper
_ctx_for_cap: Callable[..., Any] = getattr(_combined, '_ctx_for_cap')  # noqa: B009 - private helper


def available() -> bool:
    """Whether this pydantic-ai has the internals the simulation patches (they are private and may move)."""
    has_hooks = all(name in CombinedCapability.__dict__ for name in (*_PLAIN_HOOKS, *_WRAP_HOOKS))
    return has_hooks and '_dispatch' in {field.name for field in fields(CombinedCapability)}


def _overrides(capability: AbstractCapability[Any], hook: str) -> bool:
    return getattr(type(capability), hook) is not getattr(AbstractCapability, hook)


def _plain_hook(hook: str) -> Callable[..., Awaitable[Any]]:
    value_name = 'result' if hook == 'after_tool_execute' else 'args'
    reverse = hook.startswith('after_')

    async def dispatch(self: CombinedCapability[Any], ctx: RunContext[Any], **kwargs: Any) -> Any:
        capabilities = list(self._dispatch)
        for capability in reversed(capabilities) if reverse else capabilities:
            if not _overrides(capability, hook):
                continue
            if (cap_ctx := _ctx_for_active_cap(capability, ctx)) is not None:
                kwargs[value_name] = await getattr(capability, hook)(cap_ctx, **kwargs)
        return kwargs[value_name]

    return dispatch


def _wrap_hook(hook: str) -> Callable[..., Awaitable[Any]]:
    async def dispatch(self: CombinedCapability[Any], ctx: RunContext[Any], **kwargs: Any) -> Any:
        handler: Callable[[Any], Awaitable[Any]] = kwargs.pop('handler')
        args = kwargs.pop('args')
        chain = handler
        for capability in reversed(self._dispatch):
            if _overrides(capability, hook) and _ctx_for_active_cap(capability, ctx) is not None:
                chain = _link(capability, hook, ctx, kwargs, chain)
        return await chain(args)

    return dispatch


def _link(
    capability: AbstractCapability[Any],
    hook: str,
    ctx: RunContext[Any],
    kwargs: dict[str, Any],
    inner: Callable[[Any], Awaitable[Any]],
) -> Callable[[Any], Awaitable[Any]]:
    async def wrapped(args: Any) -> Any:
        return await getattr(capability, hook)(_ctx_for_cap(capability, ctx), args=args, handler=inner, **kwargs)

    return wrapped


def _copy_by_dict(self: RunContext[Any]) -> RunContext[Any]:
    new = object.__new__(type(self))
    new.__dict__.update(self.__dict__)
    return new


@contextmanager
def proposed_tool_hook_dispatch() -> Iterator[None]:
    """Run the block with the proposed dispatch in place; restore pydantic-ai's own on exit."""
    saved = {name: CombinedCapability.__dict__[name] for name in (*_PLAIN_HOOKS, *_WRAP_HOOKS)}
    had_copy = '__copy__' in RunContext.__dict__
    try:
        for name in _PLAIN_HOOKS:
            setattr(CombinedCapability, name, _plain_hook(name))
        for name in _WRAP_HOOKS:
            setattr(CombinedCapability, name, _wrap_hook(name))
        if not had_copy:
            RunContext.__copy__ = _copy_by_dict  # pyright: ignore[reportAttributeAccessIssue]
        yield
    finally:
        for name, method in saved.items():
            setattr(CombinedCapability, name, method)
        if not had_copy:
            del RunContext.__copy__  # pyright: ignore[reportAttributeAccessIssue]
