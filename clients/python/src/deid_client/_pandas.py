"""pandas is optional: imported only by the calls that take or return DataFrames."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas


def require_pandas() -> Any:
    """The pandas module, or an ImportError saying how to install it."""
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - exercised only without pandas
        raise ImportError(
            "this call needs pandas: pip install 'deid-client[pandas]' (or pip install pandas)"
        ) from e
    return pandas


def is_dataframe(obj: object) -> bool:
    """Whether obj is a pandas DataFrame, without importing pandas when it is not loaded."""
    import sys

    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def frame_type() -> type[pandas.DataFrame]:
    pd = require_pandas()
    t: type[pandas.DataFrame] = pd.DataFrame
    return t
