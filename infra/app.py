"""The CDK app: ``cdk synth`` / ``cdk deploy`` run this. Context: ``stage`` (default dev), ``alarm_email``,
``egress`` (``direct``, the default, or ``fixed``: infra/egress.py) and ``nat_gateways`` (with fixed egress)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import DEFAULT, StackConfig
from infra.crawls import deployed_specs
from infra.nag import acknowledge
from infra.stack import SluiceStack

CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"


def context() -> dict[str, object]:
    """cdk.json's context (feature flags included), for apps built outside the CLI, as tests build them."""
    loaded: dict[str, object] = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
    return loaded


def stack_config(app: cdk.App) -> StackConfig:
    """The defaults, with what the context sets: ``stage``, ``egress`` (direct or fixed), ``nat_gateways``."""
    get = app.node.try_get_context
    nat = get("nat_gateways")
    try:
        return dataclasses.replace(
            DEFAULT,
            stage=get("stage") or DEFAULT.stage,
            egress=get("egress") or DEFAULT.egress,
            nat_gateways=int(nat) if nat is not None else DEFAULT.nat_gateways,
        )
    except ValueError as exc:
        raise SystemExit(f"cdk context: {exc}") from None


def build(app: cdk.App) -> SluiceStack:
    config = stack_config(app)
    stage = config.stage
    stack = SluiceStack(
        app,
        f"Sluice-{stage}",
        config=config,
        specs=deployed_specs(),
        alarm_email=app.node.try_get_context("alarm_email"),
        description="Sluice: scheduled, polite, idempotent crawls with verdicts and alarms",
    )
    acknowledge(stack)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack


def main() -> None:
    app = cdk.App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
