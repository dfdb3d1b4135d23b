"""The query-tool script of `_scripted_queries`, for one run whose tools change on the way: once a return stores an
image or a PDF, the view tool is offered, and pydantic-ai tells the model so in a request part of its own (which
`Script` would take for a new user prompt). Steps are counted over the whole run instead."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai.messages import BinaryContent, ModelMessage, RetryPromptPart, ToolReturnPart

from .._scripted_queries import Script

__all__ = ('RunScript',)


@dataclass
class RunScript(Script):
    """`Script`, its steps counted from the start of the run; the files each answer held are kept too."""

    files: list[list[BinaryContent]] = field(default_factory=list[list[BinaryContent]])
    """The files of each answer in `shown`, in order (empty for a text answer)."""

    def record(self, part: ToolReturnPart | RetryPromptPart) -> None:
        """Keep the text of `part` in `shown` and its files in `files`."""
        if isinstance(part, RetryPromptPart):
            self.shown.append(part.model_response())
            self.files.append([])
            return
        content: object = part.content
        items: list[object] = list(content) if isinstance(content, list) else [content]
        self.shown.append('\n'.join(str(item) for item in items if not isinstance(item, BinaryContent)))
        self.files.append([item for item in items if isinstance(item, BinaryContent)])

    def steps_from(self, messages: list[ModelMessage]) -> int:
        """The first message: the view tool's arrival is a request part `Script` would take for a new prompt."""
        return 0
