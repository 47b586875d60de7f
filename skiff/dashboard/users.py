"""The dashboard's users and policies page (ACL 2.0, docs/acl.md): the brokers' users and their
ACL entries, and forms that create, disable, delete them, over the admin client's AUTH_* calls.

Passwords never reach the page: the list drops them, and a new user's password is sent once,
to the brokers. What the signed-in user may not do the brokers refuse (403 with their reason).
"""

from __future__ import annotations

from typing import Any

from skiff.client.errors import MessageValidationError
from skiff.dashboard.form import Form
from skiff.dashboard.service import Dashboard

USER_TYPES = ("Normal", "Super")
DECISIONS = ("Allow", "Deny")
ACTIONS = ("All", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List")


async def users_page(d: Dashboard) -> dict[str, Any]:
    users = [{k: v for k, v in u.items() if k != "password"} for u in await d.admin.users()]
    entries = [{"subject": acl["subject"], "policy_type": p.get("policyType", "Custom"), "resource": e["resource"],
                "actions": ",".join(e.get("actions", [])), "source_ips": ",".join(e.get("sourceIps", [])) or "*",
                "decision": e["decision"]}
               for acl in await d.admin.acls() for p in acl.get("policies", []) for e in p.get("entries", [])]
    return {"users": users, "entries": entries, "user_types": USER_TYPES, "decisions": DECISIONS,
            "actions": ACTIONS}


def _choice(form: Form, name: str, allowed: tuple[str, ...], default: str) -> str:
    value = form.text(name, default) or default
    if value not in allowed:
        raise MessageValidationError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return value


async def create_user(d: Dashboard, form: Form) -> dict[str, Any]:
    name, password = form.text("username"), form.text("password")
    if not name or not password:
        raise MessageValidationError("a user needs a name and a password")
    user_type = _choice(form, "user_type", USER_TYPES, "Normal")
    brokers = await d.admin.create_user(name, password, user_type=user_type)
    return {"username": name, "user_type": user_type, "brokers": brokers}


async def set_user_status(d: Dashboard, name: str, form: Form) -> dict[str, Any]:
    status = _choice(form, "status", ("enable", "disable"), "enable")
    return {"username": name, "status": status, "brokers": await d.admin.update_user(name, user_status=status)}


async def delete_user(d: Dashboard, name: str) -> dict[str, Any]:
    return {"username": name, "brokers": await d.admin.delete_user(name)}


async def set_entry(d: Dashboard, form: Form) -> dict[str, Any]:
    subject = f"User:{form.text('username')}"
    resources = [r.strip() for r in form.text("resources").split(",") if r.strip()]
    actions = [a.strip() for a in form.text("actions").split(",") if a.strip()]
    if not resources or not actions:
        raise MessageValidationError("an entry needs at least one resource and one action")
    decision = _choice(form, "decision", DECISIONS, "Allow")
    ips = [ip.strip() for ip in form.text("source_ips", "").split(",") if ip.strip()]
    brokers = await d.admin.set_acl(subject, resources, actions, decision, source_ips=ips)
    return {"subject": subject, "resources": resources, "brokers": brokers}


async def delete_entry(d: Dashboard, form: Form) -> dict[str, Any]:
    subject, resource = form.text("subject"), form.text("resource")
    policy_type = _choice(form, "policy_type", ("Custom", "Default"), "Custom")
    return {"subject": subject, "resource": resource,
            "brokers": await d.admin.delete_acl(subject, resource, policy_type=policy_type)}
