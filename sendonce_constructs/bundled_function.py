"""The one way a sendonce function is built: the consumer, the outbox relay and the SES event recorder alike.

Each gets its own log group, its own role with no AWS managed policy, JSON logs at the pipeline's levels, the
shared runtime asset, the pipeline's runtime, architecture and tracing, the customer keys its data is under, and
the cdk-nag acknowledgements that come with that shape, placed on the resource each is about. The ids are the
caller's (``NAME``, ``NAMELogs``, ``NAMERole`` in the caller's scope), so an existing function keeps its logical id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from .acknowledgements import acknowledge
from .data_keys import grant_data_keys
from .runtime_asset import runtime_code


@dataclass(frozen=True)
class FunctionOptions:
    """What every bundled function of one pipeline shares."""

    runtime: lambda_.Runtime
    architecture: lambda_.Architecture
    log_retention: logs.RetentionDays
    tracing: lambda_.Tracing | None = None
    data_keys: Sequence[kms.IKey] = ()
    log_level: lambda_.ApplicationLogLevel = lambda_.ApplicationLogLevel.INFO
    log_removal_policy: RemovalPolicy = RemovalPolicy.DESTROY
    vpc: ec2.IVpc | None = None
    vpc_subnets: ec2.SubnetSelection | None = None
    security_groups: Sequence[ec2.ISecurityGroup] | None = None
    precompiled_bytecode: bool = False  # the asset carries the synth interpreter's bytecode

    @property
    def traced(self) -> bool:
        return self.tracing in (lambda_.Tracing.ACTIVE, lambda_.Tracing.PASS_THROUGH)


class BundledFunction:
    def __init__(
        self,
        scope: Construct,
        name: str,
        *,
        handler: str,
        description: str,
        role_description: str,
        timeout: Duration,
        environment: Mapping[str, str],
        options: FunctionOptions,
        invoked_by: str,
        memory_size: int = 256,
        reserved_concurrent_executions: int | None = None,
    ) -> None:
        self.log_group = logs.LogGroup(scope, f"{name}Logs", retention=options.log_retention,
                                       removal_policy=options.log_removal_policy)
        self.role = iam.Role(scope, f"{name}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description=role_description)
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            scope, name, code=runtime_code(options.precompiled_bytecode), handler=handler, runtime=options.runtime,
            architecture=options.architecture, timeout=timeout, memory_size=memory_size, role=self.role,
            log_group=self.log_group, logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=options.log_level,
            system_log_level_v2=lambda_.SystemLogLevel.WARN, tracing=options.tracing,
            environment=dict(environment), description=description, vpc=options.vpc,
            vpc_subnets=options.vpc_subnets, security_groups=list(options.security_groups or []) or None,
            reserved_concurrent_executions=reserved_concurrent_executions,
        )
        if options.vpc is not None:
            acknowledge(self.role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                        "AWSLambdaVPCAccessExecutionRole]",
                        "Lambda's own policy for a function in a VPC (its network interfaces), which CDK attaches; "
                        "its EC2 actions have no narrower resource.")
        acknowledge(self.function, "Serverless-LambdaDLQ",
                    f"Invoked synchronously by {invoked_by} only; what fails stays with that source (its "
                    "dead-letter queue or on-failure destination), so an async-invocation DLQ would receive nothing.")
        if options.traced:
            acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]",
                        "X-Ray's PutTraceSegments and PutTelemetryRecords have no resource-level permissions.")
        else:
            acknowledge(self.function, "Serverless-LambdaTracing",
                        "Tracing is opt-in (prop tracing): each record's path is in its JSON log line and the EMF "
                        "metrics, and X-Ray adds cost per email.")
        grant_data_keys(list(options.data_keys), self.function, self.role)
        # Lambda makes a function depend on its whole role, which it also names by GetAtt: cfn-lint calls that
        # DependsOn redundant (W3005). Harmless, and any dependency a user adds must stay: say so, change nothing.
        cfn_function = self.function.node.default_child
        assert isinstance(cfn_function, lambda_.CfnFunction)
        cfn_function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
