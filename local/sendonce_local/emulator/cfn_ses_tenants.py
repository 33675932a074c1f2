"""Teaches moto's CloudFormation ``AWS::SES::Tenant``, which it skips, so that a stack made with ``add_ses_tenant``
deploys to the emulator as it does to AWS: the tenant is made in :mod:`.ses_tenants`' backend with its reputation
policy and suppression settings, ``Ref`` gives its name and ``Fn::GetAtt`` its ``Arn`` and ``TenantId``; an update
sets both settings again, and a delete forgets it. Its resource associations are not kept (the emulator lets any
identity or configuration set send for any tenant).
"""

from __future__ import annotations

from typing import Any

from sendonce_contract.ses_tenant_settings import ReputationPolicy, TenantSuppression

from .ses_tenant_backend import SesTenantsBackend, Tenant, ses_tenants_backends, suppression_of

_cfn_taught = False


def teach_cloudformation_ses_tenants() -> None:
    """Register ``AWS::SES::Tenant`` with moto's CloudFormation (idempotent): the tenant made in this module's
    backend with its reputation policy and suppression settings, ``Ref`` its name and ``Fn::GetAtt`` its ``Arn`` and
    ``TenantId``; an update sets both settings again; a delete forgets it. Its resource associations are not kept."""
    global _cfn_taught
    if _cfn_taught:
        return
    from moto.cloudformation import parsing
    from moto.core.common_models import CloudFormationModel

    class CfnTenant(CloudFormationModel):
        def __init__(self, tenant: Tenant) -> None:
            self.tenant = tenant

        @property
        def physical_resource_id(self) -> str:
            return self.tenant.name

        @staticmethod
        def cloudformation_name_type() -> str:
            return "TenantName"

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::SES::Tenant"

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return attr in ("Arn", "TenantId")

        def get_cfn_attribute(self, attribute_name: str) -> str:
            return self.tenant.arn if attribute_name == "Arn" else self.tenant.tenant_id

        @classmethod
        def create_from_cloudformation_json(
            cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str,
            **kwargs: Any,
        ) -> CfnTenant:
            properties = cloudformation_json.get("Properties", {})
            backend = ses_tenants_backends[account_id][region_name]
            tenant = backend.create_tenant(properties.get("TenantName") or resource_name,
                                           list(properties.get("Tags") or []),
                                           suppression_of(properties.get("SuppressionAttributes")))
            _set_policy(backend, tenant, properties)
            return cls(tenant)

        @classmethod
        def update_from_cloudformation_json(
            cls, original_resource: CfnTenant, new_resource_name: str, cloudformation_json: dict[str, Any],
            account_id: str, region_name: str,
        ) -> CfnTenant:
            properties = cloudformation_json.get("Properties", {})
            backend = ses_tenants_backends[account_id][region_name]
            tenant = original_resource.tenant
            backend.set_suppression(tenant, suppression_of(properties.get("SuppressionAttributes"))
                                    or TenantSuppression.from_api({}))
            _set_policy(backend, tenant, properties)
            return original_resource

        @classmethod
        def delete_from_cloudformation_json(
            cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str,
        ) -> None:
            backend = ses_tenants_backends[account_id][region_name]
            name = cloudformation_json.get("Properties", {}).get("TenantName") or resource_name
            if name in backend.tenants:
                backend.delete_tenant(name)

    for cached in (parsing.get_model_list, parsing.get_model_map, parsing.get_name_type_map):
        cached.cache_clear()
    _cfn_taught = CfnTenant.cloudformation_type() in parsing.get_model_map()


def _set_policy(backend: SesTenantsBackend, tenant: Tenant, properties: dict[str, Any]) -> None:
    """A template's ``ReputationEntity.Policy.ReputationEntityPolicy``, or SES's standard when it names none."""
    policy = ((properties.get("ReputationEntity") or {}).get("Policy") or {}).get("ReputationEntityPolicy")
    backend.set_policy(tenant, policy or ReputationPolicy.STANDARD.arn(backend.partition, backend.region_name))
