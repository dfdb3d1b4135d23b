"""What the model reads beside (or instead of) an image: what was sent, where the original is, how to look again."""

from __future__ import annotations

from ._fit import FittedImage
from ._limits import ImageTarget
from ._sniff import ImageInfo

__all__ = (
    'VIEW_TOOL_NAME',
    'aged_images_stub',
    'animation_note',
    'blob_view_note',
    'fitted_marker',
    'not_sent_marker',
    'size_text',
    'unstored_note',
)

VIEW_TOOL_NAME = 'view_tool_result_image'
"""The tool the model looks at a stored image again with."""


def size_text(nbytes: int) -> str:
    """`7.3 MB`, `25 KB`, `512 bytes`."""
    if nbytes >= 1_000_000:
        return f'{nbytes / 1_000_000:.1f} MB'
    if nbytes >= 1_000:
        return f'{nbytes / 1_000:.0f} KB'
    return f'{nbytes} bytes'


def _kind(media_type: str) -> str:
    return media_type.removeprefix('image/').upper()


def animation_note(info: ImageInfo) -> str:
    """`animated, 500 frames` (`10,000+ frames` past the count's bound); empty for a still image."""
    if info.frames <= 1:
        return ''
    return f'animated, {info.frames:,}{"" if info.frames_exact else "+"} frames'


def fitted_marker(info: ImageInfo, fitted: FittedImage, handle: str | None, reason: str = '') -> str:
    """The line before a fitted copy: the original's size, the copy's, and the handle to look closer with."""
    animated = animation_note(info)
    copy = f'its first frame, a {fitted.width}x{fitted.height}' if animated else f'a {fitted.width}x{fitted.height}'
    head = (
        f'[Image {info.width}x{info.height} {_kind(info.media_type)} ({size_text(info.nbytes)}'
        f'{", " + animated if animated else ""}), shown below as {copy} {_kind(fitted.media_type)} copy.'
    )
    if handle is None:
        return f'{head} {unstored_note(reason)}]'
    return (
        f"{head} Original stored under handle '{handle}': {VIEW_TOOL_NAME}(handle, x, y, width, height) shows any "
        'region of it in full detail.]'
    )


def not_sent_marker(
    info: ImageInfo | None, media_type: str, nbytes: int, why: str, handle: str | None, reason: str = ''
) -> str:
    """The text in place of an image that could not be sent: what it is, why, and where it is kept."""
    what = (
        f'Image {info.width}x{info.height} {_kind(info.media_type)} ({size_text(nbytes)})'
        if info is not None
        else f'Image declared {media_type} ({size_text(nbytes)})'
    )
    kept = f"Stored as it is under handle '{handle}'." if handle is not None else unstored_note(reason)
    return f'[{what} not shown: {why}. {kept}]'


def blob_view_note(info: ImageInfo | None, shown: int | None) -> str:
    """How the model sees an image blob: `image 2 below` (shown with the return, as the `shown`-th image), or the
    view tool's name; an animation says so (only its first frame is shown).
    """
    animated = animation_note(info) if info is not None else ''
    if shown is None:
        return f'{animated}; {VIEW_TOOL_NAME} shows it' if animated else f'{VIEW_TOOL_NAME} shows it'
    first = f'{animated}, first frame as ' if animated else ''
    return f'{first}image {shown} below; {VIEW_TOOL_NAME} zooms'


def unstored_note(reason: str) -> str:
    """What the marker says when the original could not be stored."""
    return f'The original could not be stored ({reason}).' if reason else 'The original was not stored.'


def pillow_missing_why(target: ImageTarget) -> str:
    """Why an image over the limits is not sent without Pillow (for the model and, in a warning, the operator)."""
    return (
        f'it is over the image limits ({target.long_edge} px long edge, {size_text(target.max_bytes)}) and Pillow, '
        "needed to make a smaller copy, is not installed (pip install 'pydantic-ai-harness-context[media]')"
    )


def aged_images_stub(tool_name: str, handles: list[str], text_tokens: int) -> str:
    """The stub of an aged return that held images: the images' handles, and how to see them again."""
    names = ', '.join(f"'{handle}'" for handle in handles)
    count = f'{len(handles)} image' + ('s' if len(handles) != 1 else '')
    text = f' and ~{text_tokens:,} tokens of text' if text_tokens else ''
    return (
        f'[Moved out of context: the output of `{tool_name}` ({count}{text}). Images stored under {names}: '
        f'{VIEW_TOOL_NAME}(handle) shows one again.]'
    )
