"""One pydantic-settings object per process, built at the edge (`ARCHSEARCH_` prefix).

With no configuration at all the service runs embedded: a SQLite file and an artifact
directory under the per-user data home, and jobs run in a local runner.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from archsearch.jobs.platform.cores import usable_cores
from archsearch.jobs.platform.secret_keys import check_fernet_keys

MIN_SECRET_CHARACTERS = 32  # a guessable secret lets anyone forge a session cookie


def default_data_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "archsearch"


class Settings(BaseSettings):
    # An empty variable means "unset", so `ARCHSEARCH_ARTIFACT_ROOT=` never means the cwd.
    # A refused value is not echoed in the error: it may be a key or a password.
    model_config = SettingsConfigDict(
        env_prefix="ARCHSEARCH_",
        env_file=None,
        extra="ignore",
        env_ignore_empty=True,
        hide_input_in_errors=True,
    )

    home: Path = Field(default_factory=default_data_home, description="embedded-mode data home")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default: a SQLite file under `home`"
    )
    broker_url: str | None = Field(
        default=None, description="Redis URL of the Celery broker; unset: jobs run in-process"
    )
    artifact_root: Path | None = Field(default=None, description="default: `home`/artifacts")
    # Object storage: artifacts, checkpoints and uploaded datasets.
    storage_url: str | None = Field(
        default=None,
        description="s3://bucket/prefix for an S3-compatible store; unset: `artifact_root`",
    )
    s3_endpoint_url: str | None = Field(
        default=None, description="endpoint of a non-AWS S3 server, e.g. http://minio:9000"
    )
    s3_region: str | None = Field(default=None, description="default: AWS_DEFAULT_REGION")
    s3_access_key_id: str | None = Field(
        default=None, description="unset: boto3's usual chain (AWS_ACCESS_KEY_ID, profile, role)"
    )
    s3_secret_access_key: SecretStr | None = Field(
        default=None, description="with `s3_access_key_id`; unset: AWS_SECRET_ACCESS_KEY, ..."
    )
    download_redirect_seconds: int = Field(
        default=0,
        ge=0,
        le=7 * 24 * 3600,
        description="S3 only: >0 redirects downloads to a presigned URL valid this long",
    )
    data_dir: Path | None = Field(
        default=None, description="folder holding mnist/ and fashion-mnist/ IDX files"
    )
    system_data_dirs: tuple[Path, ...] = Field(
        # Debian's dataset-fashion-mnist package installs here: found without configuration.
        default=(Path("/usr/share/datasets"),),
        description="folders searched after `data_dir` for the built-in datasets' files",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="attempts of a job before it fails: runs that ended without handing the "
        "job back (a graceful stop, a preemption or a storage outage gives its attempt back)",
    )
    lease_seconds: float = Field(
        default=60.0, gt=0, description="a silent worker loses its job after this"
    )
    progress_flush_seconds: float = Field(
        # 1 s on one machine, where the database's cost does not matter and a live curve a
        # second behind reads as live. The cluster's ConfigMap sets 2 s: the progress write
        # is a fleet's most frequent, and at 1 s a worker costs PostgreSQL 0.53-0.62 ms of
        # CPU a second, at 2 s 0.33-0.37 (bench/fleet.py, docs/cluster.md "Sizing").
        default=1.0,
        gt=0,
        le=60,
        description="how often a running job writes its progress and metric points: a "
        "live curve's delay, and the fleet's most frequent write (docs/cluster.md)",
    )
    storage_outage_limit_seconds: float = Field(
        default=600.0,
        gt=0,
        description="an object-store outage shorter than this never fails a job (it is "
        "retried for a lease time, then handed back to the queue without using an attempt)",
    )
    device_unseen_seconds: float = Field(
        default=600.0,
        ge=0,
        description="team mode: a queued job asking for a device (cuda) that no worker has "
        "offered for this long says so in its pending_reason and in /v1/queue",
    )
    orphan_sweep_seconds: float = Field(
        default=600.0, gt=0, description="how often a worker removes objects of no live job"
    )
    orphan_grace_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="an object of no job or dataset row is removed once this old (an upload "
        "in progress writes its files before its row)",
    )
    stop_grace_seconds: float = Field(
        default=60.0,
        ge=0,
        description="on SIGTERM a worker lets its job run to its next checkpoint for at most "
        "this long, then stops it at the next step; either way the job goes back to the queue "
        "without spending an attempt (keep it under the pod's terminationGracePeriodSeconds)",
    )
    preemption: bool = Field(
        default=False,
        description="a queued job of priority `preemption_priority` or above that finds every "
        "worker able to run it busy stops the running job of the lowest lower priority (the "
        "youngest among equals) at its next checkpoint; that job goes back to the queue "
        "without spending an attempt and resumes later from its checkpoint",
    )
    preemption_priority: Literal["high", "urgent"] = Field(
        default="urgent", description="the lowest priority that may preempt (with `preemption`)"
    )
    visibility_timeout: int = Field(
        default=7 * 24 * 3600, description="broker redelivery timeout, above the longest job"
    )
    queue_name: str = "archsearch"
    host: str = "127.0.0.1"
    port: int = 8000
    local_runner_threads: int = Field(default=1, ge=1)
    # Team mode.
    auth: Literal["auto", "token", "none"] = Field(
        default="auto",
        description="auto: tokens required in team mode (a broker is set), not embedded",
    )
    max_running_per_user: int | None = Field(default=None, ge=1, description="default user quota")
    max_running_per_team: int | None = Field(default=None, ge=1, description="default team quota")
    fleet_gpu_memory_gb: float | None = Field(
        default=None,
        gt=0,
        description="cluster: the GPU memory (GB) each autoscaled CUDA worker's slot offers "
        "(the GPU's memory / `worker_slots`); the autoscaler's count leaves out jobs asking "
        "more (unset: every request fits)",
    )
    worker_device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="what a worker process offers; auto: CUDA when present"
    )
    # torch's intra-op threads per worker process; without a setting every process
    # takes every core, and the processes of one machine fight over them.
    torch_threads: int | None = Field(
        default=None,
        ge=1,
        description="torch threads per worker process (and per embedded runner); "
        "default: `OMP_NUM_THREADS` when set, else the usable CPU cores (the cgroup's CPU "
        "quota included) // `worker_processes` // `worker_slots` (// `local_runner_threads` "
        "embedded), >= 1",
    )
    worker_processes: int = Field(
        default=1, ge=1, description="worker processes that share this machine's cores"
    )
    # Packing: a worker serves this many jobs at once on its one device, each in its own
    # pool process (a slot) with its share of the device's memory (docs/cluster.md, "Slots").
    worker_slots: int = Field(
        default=1,
        ge=1,
        le=64,
        description="jobs a worker runs at once on its device, each in its own process; a "
        "slot offers the GPU's memory / slots, and a job's device-hours are charged 1/slots",
    )
    worker_slot_memory_gb: float | None = Field(
        default=None,
        gt=0,
        description="CPU workers: the memory (GB) one slot's job may allocate beyond the warm "
        "worker process; a job that needs more fails alone, saying so (unset: no cap)",
    )
    worker_alive_file: Path | None = Field(
        default=None,
        description="touched by every worker process at each heartbeat; `archsearch worker "
        "alive` (the pods' liveness probe) reads its age. Default: `home`/worker-alive",
    )
    dataset_cache_dir: Path | None = Field(
        default=None,
        description="normalised datasets kept by the workers (memory-mapped .npy); "
        "default: `home`/cache/datasets",
    )
    # Request bodies and dataset uploads: every limit is answered with 413 naming it.
    json_max_bytes: int = Field(
        default=1 << 20, ge=1, description="size of a JSON request body (a job spec)"
    )
    upload_max_bytes: int = Field(default=256 << 20, ge=1, description="size of one uploaded file")
    upload_max_uncompressed_bytes: int = Field(
        default=1 << 30, ge=1, description="total decompressed size of a zip or .npz upload"
    )
    upload_max_entries: int = Field(default=100_000, ge=1, description="files in a zip upload")
    upload_max_image_pixels: int = Field(
        default=4096 * 4096, ge=1, description="pixels of one image"
    )
    # an upload's decoded arrays are built inside this budget (checked as they are
    # produced), and at most this many uploads are decoded at once in the API process.
    upload_max_memory_bytes: int = Field(
        default=512 << 20, ge=1 << 20, description="memory one upload's decoded arrays may use"
    )
    upload_concurrent_validations: int = Field(
        default=1, ge=1, description="uploads read and validated at once by one API process"
    )
    upload_max_waiting: int = Field(
        default=4,
        ge=0,
        description="uploads that may wait for a validation slot; more answer 503 busy",
    )
    job_log_max_bytes: int = Field(
        default=1 << 20, ge=1024, description="log lines kept per job; later lines are dropped"
    )
    dataset_min_class_samples: int = Field(
        default=5, ge=1, description="training samples every class of an upload needs"
    )
    # The dashboard's sign-in: a session cookie signed with this secret.
    session_secret: SecretStr | None = Field(
        default=None,
        description="signs dashboard session cookies; set the same value on every API "
        "process (unset: a random one per process, so sessions end when it restarts)",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="addresses (comma-separated, or *) of TLS-terminating proxies whose "
        "X-Forwarded-Proto/-For the API trusts: behind one on another host, set its address, "
        "so session cookies keep Secure and logs name the client",
    )
    keep_alive_seconds: float = Field(
        default=75.0,
        gt=0,
        description="an idle HTTP connection stays open this long; longer than a client's "
        "polling pause, so a reused connection is never closed under the client",
    )
    auth_failures_per_minute: int = Field(
        default=20,
        ge=1,
        description="failed authentications per client address, and per token prefix, in a "
        "minute before further attempts answer 429 (counted per API process)",
    )
    session_max_age_seconds: int = Field(
        default=8 * 3600, ge=60, le=30 * 24 * 3600, description="a dashboard session's lifetime"
    )
    study_max_jobs: int = Field(
        default=500, ge=1, description="jobs one study may create (arms x grid x seeds, trials)"
    )

    # Webhooks: outbound POSTs are bounded, retried with backoff, and kept off internal
    # addresses in team mode.
    webhook_timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="one webhook request's connect and read timeout"
    )
    webhook_retry_hours: float = Field(
        default=24.0, ge=1, description="how long a failing delivery is retried before it fails"
    )
    webhook_backoff_max_seconds: float = Field(
        default=300.0, gt=0, description="the longest wait between two tries of a delivery"
    )
    webhook_max_body_bytes: int = Field(
        default=64 << 10, ge=1024, description="largest webhook body sent (a bigger one is cut)"
    )
    webhook_allow_private_targets: bool = Field(
        default=False,
        description="team mode: allow webhook URLs on loopback, private and link-local "
        "addresses (embedded mode always allows loopback)",
    )
    webhook_poll_seconds: float = Field(
        default=1.0, gt=0, description="how often a process looks for due webhook deliveries"
    )
    # Webhook signing secrets are stored encrypted (Fernet); see `jobs/platform/secret_keys.py`.
    secret_keys: SecretStr | None = Field(
        default=None,
        description="Fernet keys, comma-separated, newest first, that encrypt webhook signing "
        "secrets at rest: team mode must set the same value on every API and worker process "
        "(`archsearch admin new-secret-key` prints a key); unset in embedded mode, a key "
        "kept in `home`/secret.key (made at first use)",
    )

    @field_validator("session_secret")
    @classmethod
    def _long_enough(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and len(secret.get_secret_value()) < MIN_SECRET_CHARACTERS:
            raise ValueError(
                f"ARCHSEARCH_SESSION_SECRET has {len(secret.get_secret_value())} characters; "
                f"it signs session cookies and needs at least {MIN_SECRET_CHARACTERS}: make "
                "one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
            )
        return secret

    @field_validator("secret_keys")
    @classmethod
    def _fernet_keys(cls, keys: SecretStr | None) -> SecretStr | None:
        if keys is not None:
            check_fernet_keys(keys.get_secret_value(), "ARCHSEARCH_SECRET_KEYS")
        return keys

    @property
    def embedded(self) -> bool:
        return self.broker_url is None

    @property
    def tokens_required(self) -> bool:
        return self.auth == "token" or (self.auth == "auto" and not self.embedded)

    @cached_property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'archsearch.db'}"

    @cached_property
    def resolved_artifact_root(self) -> Path:
        return self.artifact_root or self.home / "artifacts"

    @cached_property
    def resolved_worker_alive_file(self) -> Path:
        return self.worker_alive_file or self.home / "worker-alive"

    @cached_property
    def data_dirs(self) -> tuple[Path, ...]:
        """Where the built-in datasets' files are searched, in order."""
        first = self.data_dir or self.home / "datasets"
        return (first, *self.system_data_dirs)

    @property
    def resolved_torch_threads(self) -> int:
        """Threads one job may use: the setting, else `OMP_NUM_THREADS` (the variable torch
        itself reads, which the default below would otherwise override), else this
        process's share of the cores it may use (its cgroup's CPU quota included)."""
        if self.torch_threads is not None:
            return self.torch_threads
        omp_threads = os.environ.get("OMP_NUM_THREADS", "").strip()
        if omp_threads.isdigit() and int(omp_threads) > 0:
            return int(omp_threads)
        per_process = self.local_runner_threads if self.embedded else self.worker_slots
        sharing = self.worker_processes * per_process
        return max(1, usable_cores() // sharing)

    @cached_property
    def resolved_dataset_cache_dir(self) -> Path:
        return self.dataset_cache_dir or self.home / "cache" / "datasets"

    def prepare_directories(self) -> None:
        self.resolved_artifact_root.mkdir(parents=True, exist_ok=True)
        if self.resolved_database_url.startswith("sqlite:///"):
            Path(self.resolved_database_url.removeprefix("sqlite:///")).parent.mkdir(
                parents=True, exist_ok=True
            )
