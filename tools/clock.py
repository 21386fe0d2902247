"""Pack `clock`: the current date and time, and date arithmetic (models do not know what day it is)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentflow.errors import ToolError
from agentflow.tools import tool


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"unknown time zone {name!r}; use an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from None


@tool
def current_time(timezone: str = "UTC") -> dict[str, str]:
    """The current date and time in a time zone, as ISO 8601 plus the weekday.

    Args:
        timezone: IANA time zone name, e.g. "UTC", "America/New_York", "Asia/Tokyo".
    """
    now = datetime.now(_zone(timezone))
    return {"iso": now.isoformat(timespec="seconds"), "weekday": now.strftime("%A"), "timezone": timezone}


def _parse_date(value: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(f"cannot read date {value!r}; write it as YYYY-MM-DD") from None


@tool
def date_diff(start: str, end: str) -> dict[str, int]:
    """Days (and whole weeks) from one date to another; negative when end is before start.

    Args:
        start: First date, YYYY-MM-DD.
        end: Second date, YYYY-MM-DD.
    """
    days = (_parse_date(end) - _parse_date(start)).days
    return {"days": days, "weeks": int(days / 7)}


@tool
def add_days(start: str, days: int) -> dict[str, str]:
    """The date a number of days after (or before, if negative) a date, with its weekday.

    Args:
        start: The date, YYYY-MM-DD.
        days: Days to add; negative to go back.
    """
    try:
        result = _parse_date(start) + timedelta(days=days)
    except OverflowError:
        raise ToolError("the resulting date is out of range") from None
    return {"date": result.isoformat(), "weekday": result.strftime("%A")}
