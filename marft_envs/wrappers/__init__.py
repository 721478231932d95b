"""Other views of a Flex-MG environment: one seat as a Gymnasium env, the PettingZoo Parallel
API."""

from .parallel import parallel_env
from .single_seat import SingleSeat

__all__ = ["SingleSeat", "parallel_env"]
