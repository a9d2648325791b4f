"""The adapter world's types, under short names.

`Err(AdapterError_…)` raised from an export is the WIT `result`'s error.
"""

from componentize_py_types import Err, Ok  # noqa: F401
from wit_world.imports.mmc_adapter_types import (  # noqa: F401
    AdapterError,
    AdapterError_Busy,
    AdapterError_InvalidResponse,
    AdapterError_NotSent,
    AdapterError_NotSupported,
    AdapterError_Rejected,
    AdapterError_Timeout,
    AdapterError_Unauthenticated,
    AdapterError_Unavailable,
    CallbackUpdate,
    Failure,
    Inbound,
    Initiated,
    Initiated_AwaitingCustomer,
    Initiated_Completed,
    Initiated_OtpRequired,
    Initiated_Redirect,
    Initiated_Refused,
    InitiateRequest,
    OperationRef,
    OperatorInfo,
    OtpOutcome,
    PayoutRequest,
    PspStatus,
    PspStatus_Completed,
    PspStatus_Failed,
    PspStatus_NotFound,
    PspStatus_Pending,
    Redirect,
    RefundRequest,
    Settled,
    Started,
    SubjectKind,
)


def fail(error: AdapterError) -> Err:
    """The exception that returns `error` from an export."""
    return Err(error)


def failure(code: str, message: str) -> Failure:
    return Failure(code=code, message=message)
