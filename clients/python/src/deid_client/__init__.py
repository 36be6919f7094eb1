"""Python client of the deid de-identification service (API v1).

::

    from deid_client import Client, JobSpec, Attribute, KAnonymity

    with Client("http://127.0.0.1:8080", api_key="…") as deid:
        ds = deid.upload_dataset("adult.csv", delimiter=";")
        deid.put_hierarchy(ds.id, "age", "adult_hierarchy_age.csv")
        job = deid.submit_job(JobSpec(ds.id, {"age": Attribute.quasi_identifying()}, [KAnonymity(5)]))
        job = deid.wait(job)
        report = deid.get_result(job.id)
        deid.download_result(job.id, "adult-anonymized.csv")
"""

from ._version import API_VERSION, SERVICE_VERSION, __version__
from .aio import AsyncClient
from .builders import (
    Attribute,
    AverageRisk,
    BasicBetaLikeness,
    DeltaDisclosure,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    GeneticParams,
    LocalGeneralization,
    HierarchySpec,
    JobSpec,
    KAnonymity,
    PrivacyModel,
    Quality,
    RecursiveLDiversity,
    SampleUniqueness,
    KMap,
    TCloseness,
    date,
    interval,
    masking,
    order,
    suppression,
)
from .client import Client
from .errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    DeidConnectionError,
    DeidError,
    DeidTimeoutError,
    JobFailedError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServerError,
    ServiceUnavailableError,
    UnauthorizedError,
    ValidationError,
    WaitTimeoutError,
)
from .types import (
    Best,
    Column,
    Dataset,
    DatasetPage,
    ErrorInfo,
    Evaluation,
    HierarchySummary,
    HierarchyTable,
    Job,
    JobEvent,
    JobLinks,
    JobPage,
    Progress,
    QualityScore,
    Report,
    Risk,
    RiskAnalysis,
    Status,
    Suppression,
    Timings,
    TraceEntry,
)

__all__ = [
    "__version__",
    "API_VERSION",
    "SERVICE_VERSION",
    "Client",
    "AsyncClient",
    # builders
    "Attribute",
    "AverageRisk",
    "BasicBetaLikeness",
    "DeltaDisclosure",
    "DistinctLDiversity",
    "EnhancedBetaLikeness",
    "EntropyLDiversity",
    "GeneticParams",
    "LocalGeneralization",
    "HierarchySpec",
    "JobSpec",
    "KAnonymity",
    "PrivacyModel",
    "Quality",
    "RecursiveLDiversity",
    "SampleUniqueness",
    "KMap",
    "TCloseness",
    "date",
    "interval",
    "masking",
    "order",
    "suppression",
    # errors
    "ApiError",
    "BadRequestError",
    "ConflictError",
    "DeidConnectionError",
    "DeidError",
    "DeidTimeoutError",
    "JobFailedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "ServerError",
    "ServiceUnavailableError",
    "UnauthorizedError",
    "ValidationError",
    "WaitTimeoutError",
    # types
    "Best",
    "Column",
    "Dataset",
    "DatasetPage",
    "ErrorInfo",
    "Evaluation",
    "HierarchySummary",
    "HierarchyTable",
    "Job",
    "JobEvent",
    "JobLinks",
    "JobPage",
    "Progress",
    "QualityScore",
    "Report",
    "Risk",
    "RiskAnalysis",
    "Status",
    "Suppression",
    "Timings",
    "TraceEntry",
]
