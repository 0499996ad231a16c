"""Settings read from the environment: the shares of the rows the two classes of work hold are checked together."""

import pytest

from hymt.errors import ConfigError
from hymt.settings import Settings


@pytest.mark.parametrize("value", ["0.1", "1.5", "-1"])
def test_the_batch_ceiling_lies_between_the_floor_and_every_row(value):
    with pytest.raises(ConfigError, match="HYMT_BATCH_MAX_SHARE must be from HYMT_BATCH_MIN_SHARE"):
        Settings.from_env({"HYMT_BATCH_MIN_SHARE": "0.25", "HYMT_BATCH_MAX_SHARE": value})


def test_the_batch_ceiling_defaults_to_every_row_and_may_equal_the_floor():
    assert Settings.from_env({}).batch_max_share == 1.0
    assert Settings.from_env({"HYMT_BATCH_MIN_SHARE": "0.5", "HYMT_BATCH_MAX_SHARE": "0.5"}).batch_max_share == 0.5
