"""Makes moto's CloudFormation deploy the way `cdk deploy` needs it to, again and again, on one running emulator.

Each patch says what moto does and what CloudFormation does instead (moto 5.2):

- Change sets by name: moto looks a change set up by name across every stack, keeps executed ones, and on a
  name it does not know, ``delete_change_set`` fails inside moto (``to_delete`` unbound) and
  ``describe_change_set`` answers "Stack with id ... does not exist". `cdk deploy` reuses the name
  ``cdk-deploy-change-set`` for every stack and waits for it to be gone, forever. Here a name is looked up in
  the stack the call names, the newest first; describing an unknown one is ``ChangeSetNotFoundException`` and
  deleting one succeeds (`cdk deploy` deletes the name before each deploy, also after a deploy with no changes
  left none), and executing one removes the stack's other change sets, as CloudFormation does.
- Executing a change set: moto never computes the stack's outputs (``describe_stacks`` has none,
  ``cdk deploy --outputs-file`` writes ``{}``), never records its template's parameters (the next update's
  ``UsePreviousValue`` for ``BootstrapVersion`` is a ``KeyError``, or the SSM parameter's resolved value
  read as a parameter name), and a resource it fails to make escapes as
  an HTML 500 page, leaving the stack half made. Here the outputs, exports and parameters are taken from the
  executed template, and a failure is a ``CREATE_FAILED``/``UPDATE_FAILED`` event with the reason, rolled
  back: a failed create deletes what it made (``ROLLBACK_COMPLETE``, which `cdk deploy` replaces on the next
  try), a failed update goes back to the previous template (``UPDATE_ROLLBACK_COMPLETE``), so fixing the app
  and deploying again works. Rolling back, moto warns (``UserWarning``) of each resource it never made and so
  cannot delete: the failed resource itself, every time; that warning is silenced, the event says what failed.
- A FIFO queue with no ``QueueName``: CloudFormation names it ``<stack>-<id>-<suffix>.fifo``; moto leaves out
  the ``.fifo`` and then refuses the name.
- ``AWS::CloudWatch::Alarm``: moto skips it, so anything that references an alarm (a dashboard's alarm
  widget, ``Fn::GetAtt Alarm.Arn``) fails the deploy. Here it is made with CloudWatch's ``PutMetricAlarm``
  (the alarm is listed; the emulator never evaluates it).
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable
from typing import Any

from .wrap import wrap_once

_PURPOSE = "CloudFormation as `cdk deploy` uses it"
warnings.filterwarnings("ignore", message=r"Unable to delete .*, as it was never created", category=UserWarning)
_MODELS: list[type] = []
_log = logging.getLogger(__name__)


def make_cloudformation_redeployable() -> None:
    """Install every patch above (idempotent)."""
    from moto.cloudformation.models import CloudFormationBackend, Stack
    from moto.cloudformation.responses import CloudFormationResponse
    from moto.sqs.models import Queue

    wrap_once(CloudFormationResponse, "describe_change_set", lambda _: _describe_change_set, _PURPOSE)
    wrap_once(CloudFormationResponse, "delete_change_set", lambda _: _delete_change_set, _PURPOSE)
    wrap_once(CloudFormationBackend, "execute_change_set", lambda _: _execute_change_set, _PURPOSE)
    wrap_once(CloudFormationBackend, "describe_change_set",
              lambda _: lambda self, change_set_name: _change_set(self, change_set_name, None), _PURPOSE)
    wrap_once(Stack, "stack_parameters", _with_template_parameters, _PURPOSE)
    wrap_once(Queue, "create_from_cloudformation_json", _fifo_names, _PURPOSE)
    _register_alarm_model()


@functools.cache
def _not_found_error() -> type[Exception]:
    from moto.cloudformation.exceptions import CloudFormationError

    class ChangeSetNotFound(CloudFormationError):
        code = "ChangeSetNotFoundException"

    return ChangeSetNotFound


def _not_found(name: str) -> Exception:
    return _not_found_error()(f"ChangeSet [{name}] does not exist")


def _change_set(backend: Any, name: str, stack_name: str | None) -> Any:
    if name in backend.change_sets:  # an ARN
        return backend.change_sets[name]
    matches = [c for c in backend.change_sets.values() if c.change_set_name == name
               and (not stack_name or stack_name in (c.stack_name, c.stack_id))]
    if not matches:
        raise _not_found(name)
    return max(matches, key=lambda c: c.creation_time)


def _describe_change_set(self: Any) -> Any:
    from moto.core.responses import ActionResult

    return ActionResult(_change_set(self.cloudformation_backend, self._get_param("ChangeSetName"),
                                    self._get_param("StackName")))


def _delete_change_set(self: Any) -> Any:
    from moto.core.responses import EmptyResult

    backend = self.cloudformation_backend
    try:
        change_set = _change_set(backend, self._get_param("ChangeSetName"), self._get_param("StackName"))
    except _not_found_error():
        return EmptyResult()  # CloudFormation deletes a change set that is not there without complaint
    backend.change_sets.pop(change_set.change_set_id, None)
    return EmptyResult()


def _execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
    change_set = _change_set(self, change_set_name, stack_name)
    stack = self.stacks[change_set.stack_id]
    kind = "UPDATE" if change_set.change_set_type == "UPDATE" else "CREATE"
    previous = (stack.template, stack.template_dict, dict(stack.parameters))
    stack._add_stack_event(f"{kind}_IN_PROGRESS", resource_status_reason="User Initiated")
    try:
        change_set.apply()
        stack.template, stack.template_dict = change_set.template, change_set.template_dict
        stack.parameters = dict(change_set.parameters)
        stack.description = stack.template_dict.get("Description")
        stack.output_map = stack._create_output_map()
        stack.outputs  # noqa: B018 - resolved now, so an output that cannot be is this deploy's failure
        exports = list(stack.exports)
    except Exception as error:  # moto's own failure to make a resource, reported as CloudFormation does
        change_set.execution_status = "EXECUTE_FAILED"
        _log.debug("executing %s failed", change_set.change_set_name, exc_info=True)
        stack._add_stack_event(f"{kind}_FAILED", resource_status_reason=f"{type(error).__name__}: {error}")
        _roll_back(stack, kind, previous)
        return
    for export in exports:
        self.exports[export.name] = export
    stack._add_stack_event(f"{kind}_COMPLETE")
    stack.status = f"{kind}_COMPLETE"
    change_set.execution_status = "EXECUTE_COMPLETE"
    for other_id, other in list(self.change_sets.items()):
        if other.stack_id == stack.stack_id and other is not change_set:
            del self.change_sets[other_id]


def _roll_back(stack: Any, kind: str, previous: tuple[Any, dict[str, Any], dict[str, str]]) -> None:
    template, template_dict, parameters = previous
    if kind == "CREATE":
        stack._add_stack_event("ROLLBACK_IN_PROGRESS", resource_status_reason="The stack failed to create")
        try:
            stack.resource_map.delete()
            stack._add_stack_event("ROLLBACK_COMPLETE")
        except Exception as error:  # what moto could not delete stays; the stack can still be replaced
            stack._add_stack_event("ROLLBACK_COMPLETE", resource_status_reason=f"left behind: {error}")
        stack.template, stack.template_dict = template, template_dict
        stack.status = "ROLLBACK_COMPLETE"
        return
    stack._add_stack_event("UPDATE_ROLLBACK_IN_PROGRESS", resource_status_reason="The stack failed to update")
    try:
        stack.resource_map.update(template_dict, parameters)
        stack._add_stack_event("UPDATE_ROLLBACK_COMPLETE")
    except Exception as error:  # the next deploy converges from where moto stopped
        stack._add_stack_event("UPDATE_ROLLBACK_COMPLETE", resource_status_reason=f"partly restored: {error}")
    stack.template, stack.template_dict, stack.parameters = template, template_dict, parameters
    stack.output_map = stack._create_output_map()
    stack.status = "UPDATE_ROLLBACK_COMPLETE"


def _with_template_parameters(original: Any) -> Any:
    getter: Callable[[Any], dict[str, Any]] = original.fget

    @functools.wraps(getter)
    def stack_parameters(self: Any) -> dict[str, Any]:
        values = {**getter(self), **self.parameters}
        for name, spec in (self.template_dict.get("Parameters") or {}).items():
            if str(spec.get("Type", "")).startswith("AWS::SSM::Parameter::Value"):  # its name, not its value
                values[name] = self.parameters.get(name, spec.get("Default"))
        return values

    return property(stack_parameters)


def _fifo_names(original: Any) -> Any:
    create: Callable[..., Any] = original.__func__

    @functools.wraps(create)
    def create_from_cloudformation_json(cls: Any, resource_name: str, cloudformation_json: Any, *args: Any,
                                        **kwargs: Any) -> Any:
        fifo = str(cloudformation_json.get("Properties", {}).get("FifoQueue", "")).lower() == "true"
        if fifo and not str(resource_name).endswith(".fifo"):
            resource_name = f"{str(resource_name)[:75]}.fifo"
        return create(cls, resource_name, cloudformation_json, *args, **kwargs)

    return classmethod(create_from_cloudformation_json)


def _register_alarm_model() -> None:
    from moto.cloudformation import parsing
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.core.common_models import CloudFormationModel

    if "AWS::CloudWatch::Alarm" in parsing.get_model_map():
        return

    class CloudWatchAlarm(CloudFormationModel):
        """An alarm made from its template properties; its physical id is its name, ``Arn`` its ARN."""

        def __init__(self, alarm: Any) -> None:
            self.alarm = alarm

        @property
        def physical_resource_id(self) -> str:
            return str(self.alarm.name)

        @staticmethod
        def cloudformation_name_type() -> str:
            return "AlarmName"

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::CloudWatch::Alarm"

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return attr == "Arn"

        def get_cfn_attribute(self, attribute_name: str) -> str:
            return str(self.alarm.alarm_arn)

        @classmethod
        def create_from_cloudformation_json(
            cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any,
        ) -> CloudWatchAlarm:
            p = cloudformation_json.get("Properties", {})
            alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
                name=p.get("AlarmName", resource_name), namespace=p.get("Namespace", ""),
                metric_name=p.get("MetricName", ""), comparison_operator=p.get("ComparisonOperator", ""),
                evaluation_periods=int(p.get("EvaluationPeriods", 1)), period=int(p.get("Period", 60)),
                threshold=float(p.get("Threshold", 0)), statistic=p.get("Statistic", ""),
                description=p.get("AlarmDescription", ""), dimensions=p.get("Dimensions", []),
                alarm_actions=p.get("AlarmActions", []), ok_actions=p.get("OKActions", []),
                datapoints_to_alarm=p.get("DatapointsToAlarm"), treat_missing_data=p.get("TreatMissingData"),
            )
            return cls(alarm)

        @classmethod
        def update_from_cloudformation_json(
            cls, original_resource: Any, new_resource_name: str, cloudformation_json: Any, account_id: str,
            region_name: str,
        ) -> CloudWatchAlarm:
            original_resource.delete(account_id, region_name)
            return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id,
                                                       region_name)

        def delete(self, account_id: str, region_name: str) -> None:
            cloudwatch_backends[account_id][region_name].delete_alarms([self.alarm.name])

    _MODELS.append(CloudWatchAlarm)  # moto finds models as subclasses: keep this one alive
    for cached in (parsing.get_model_list, parsing.get_model_map, parsing.get_name_type_map):
        cached.cache_clear()
