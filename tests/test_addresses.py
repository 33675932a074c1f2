"""Addresses: exactly one mailbox per entry, checked strictly, sent to SES as parsed (punycode, RFC 2047)."""

from __future__ import annotations

import base64
import json
import re

import pytest
from consumer_harness import job
from hypothesis import given, settings
from hypothesis import strategies as st

from sendonce_contract.address import InvalidAddress, Mailbox, parse_mailbox, redact_addresses
from sendonce_contract.idna2008 import InvalidLabel, to_ascii_label
from sendonce_contract.message import InvalidMessage, parse_job
from sendonce_producer import EmailJob, InvalidJob, dedupe_key
from sendonce_runtime.ses_sender import build_request

# Cases from the isemail test suite (Dominic Sayers, "tests.xml", BSD licence; isemail.info), a public corpus of
# RFC 5321/5322 address cases. Data only: the address, and whether this contract accepts it. The corpus calls some
# of the refused ones valid RFC 5322 (quoted local parts, comments, domain literals, dotless domains): SES and
# most mail systems do not take them, and the contract refuses each with its own reason (the third column).
ISEMAIL_CASES = [
    ("test@iana.org", True, None),
    ("test@nominet.org.uk", True, None),
    ("test@about.museum", True, None),
    ("a@iana.org", True, None),
    ("test.test@iana.org", True, None),
    ("!#$%&`*+/=?^`{|}~@iana.org", True, None),
    ("123@iana.org", True, None),
    ("test@123.com", True, None),
    (f"{'a' * 64}@iana.org", True, None),
    ("test@mason-dixon.com", True, None),
    ("test@c--n.com", True, None),
    ("test@xn--hxajbheg2az3al.xn--jxalpdlp", True, None),
    ("xn--test@iana.org", True, None),
    ("", False, "empty"),
    ("test", False, "no '@'"),
    ("@", False, "empty local part"),
    ("test@", False, "empty domain"),
    ("@io", False, "empty local part"),
    ("@iana.org", False, "empty local part"),
    (".test@iana.org", False, "starts or ends with a dot"),
    ("test.@iana.org", False, "starts or ends with a dot"),
    ("test..iana.org", False, "no '@'"),
    ("test..test@iana.org", False, "two dots in a row"),
    ("test@iana..com", False, "empty label"),
    ("test@.iana.org", False, "empty label"),
    ("test@iana.org.", False, "empty label"),
    ("test\\@test@iana.org", False, "only quoting allows"),
    ("test@test@iana.org", False, "only quoting allows"),
    (f"{'a' * 65}@iana.org", False, "local part of 65 octets"),
    ("test@-iana.org", False, "domain label '-iana'"),
    ("test@iana-.com", False, "domain label 'iana-'"),
    ("test@iana.123", False, "all digits"),
    ("test@255.255.255.255", False, "all digits"),
    ("test@io", False, "not a fully qualified host name"),
    ('"test"@iana.org', False, "quoted local part"),
    ('""@iana.org', False, "quoted local part"),
    ('"test\\"@iana.org', False, "unclosed quote"),
    ('"test@iana.org', False, "unclosed quote"),
    ("test@[255.255.255.255]", False, "IP address literal"),
    ("test@[IPv6:1111:2222:3333:4444:5555:6666:7777:8888]", False, "IP address literal"),
    ("(comment)test@iana.org", False, "comment"),
    ("test(comment)test@iana.org", False, "comment"),
    ("test@iana.org(comment)", False, "comment"),
    ("test @iana.org", False, "white space inside the address"),
    ("test@ iana .com", False, "white space inside the address"),
    ("test@iana.org-", False, "domain label 'org-'"),
    ("test@a[255.255.255.255]", False, "IP address literal"),
    ("test@iana/icann.org", False, "domain label 'iana/icann'"),
    (f"test@{'a' * 64}.com", False, "domain label"),
    (f"a@{'.'.join(['abcdefghij' * 6 + 'abc'] * 4)}", False, "octets; the limit is 253"),
    ("test@iana.org\r\n", False, "control character (U+000D)"),
    ("\r\ntest@iana.org", False, "control character (U+000D)"),
    ("test@iana.org\x00", False, "control character (U+0000)"),
]

# Our own: everything the message contract saw wrong before this parser, and display-name forms.
OWN_CASES = [
    ("x@example.org, y@example.org", False, "more than one address (','"),
    ("X <x@example.org>, Y <y@example.org>", False, "more than one address (','"),
    ("list: a@example.org, b@example.org;", False, "group syntax"),
    ("x@example.org; y@example.org", False, "more than one address (';'"),
    ("<me@example.com", False, "must end with the address in angle brackets"),
    ("<me@example.com> !", False, "must end with the address in angle brackets"),
    ("me@example.com>", False, "'>' without '<'"),
    ("Ada <<ada@example.org>>", False, "more than one '<'"),
    ("Ada Lovelace <ada@example.org>", True, None),
    ('"Lovelace, Ada" <ada@example.org>', True, None),
    ("John Q. Public <jqp@example.org>", True, None),
    ("<ada@example.org>", True, None),
    ('"Ada" Lovelace <ada@example.org>', False, "mixes quoted and unquoted"),
    ("Ada@Home <ada@example.org>", False, "outside quotes: quote the name"),
    ("jeff@臺網中心.tw", True, None),
    ("josé@example.com", False, "non-ASCII local part: SES cannot send to it (no SMTPUTF8)"),
    ("Café Shop <shop@example.com>", True, None),
    (f"{'a' * 64}@{'b' * 63}.{'c' * 63}.{'d' * 60}.com", False, "octets; the limit is 254"),
]


# IDNA 2008's label rules (RFC 5891, 5892), which Python's IDNA 2003 codec does not apply: the four cases of the
# public corpus the parser missed, and the rules around them.
IDNA_2008_CASES = [
    ("me@xn--0.tld", False, "domain label 'xn--0': it starts with xn-- but is not valid punycode"),
    ("me@yy--0.tld", False, "domain label 'yy--0': it has hyphens in its third and fourth positions"),
    ("me@ex\uff0dample.org", False, "U+FF0D (FULLWIDTH HYPHEN-MINUS), which IDNA 2008 does not allow"),
    ("me@bad.tld-2", False, "top-level label must be 2-63 letters, or an internationalised (xn--) label"),
    ("me@\uff45xample.org", False, "U+FF45 (FULLWIDTH LATIN SMALL LETTER E)"),
    ("me@xn--abc.com", False, "domain label 'xn--abc'"),
    ("me@xn--example-.com", False, "domain label 'xn--example-'"),
    ("me@xn--fiqq24b10vi0d.tw", True, None),
    ("me@stra\u00dfe.de", True, None),  # sharp s is PVALID in IDNA 2008 (2003 mapped it to "ss")
    ("me@example.xn--p1ai", True, None),
    ("me@a\u200db.org", False, "U+200D"),  # a joiner needs a context rule: refused
    ("me@\u0301a.org", False, "starts with a combining mark"),
]


def test_idna_2008_keeps_what_2003_changed():
    assert parse_mailbox("me@stra\u00dfe.de").domain == "xn--strae-oqa.de"


@pytest.mark.parametrize(("value", "accepted", "reason"), ISEMAIL_CASES + OWN_CASES + IDNA_2008_CASES,
                         ids=[repr(c[0])[:60] for c in ISEMAIL_CASES + OWN_CASES + IDNA_2008_CASES])
def test_each_address_case_is_accepted_or_refused_with_its_reason(value, accepted, reason):
    if accepted:
        mailbox = parse_mailbox(value)
        assert mailbox.for_ses.isascii()
        assert "@" in mailbox.address
        return
    with pytest.raises(InvalidAddress) as error:
        parse_mailbox(value)
    assert reason in str(error.value), str(error.value)


def test_a_reason_names_the_missing_closing_bracket():
    with pytest.raises(InvalidAddress, match="must end with the address"):
        parse_mailbox("<me@example.com")


def test_an_internationalised_domain_is_sent_in_punycode():
    assert parse_mailbox("jeff@臺網中心.tw").for_ses == "jeff@xn--fiqq24b10vi0d.tw"
    assert parse_mailbox("Ada <ada@Bücher.example>").for_ses == "Ada <ada@xn--bcher-kva.example>"


def test_a_non_ascii_display_name_is_rfc_2047_encoded_for_ses():
    sent = parse_mailbox("Café Shop <shop@example.com>").for_ses
    assert sent == "=?utf-8?b?" + base64.b64encode("Café Shop".encode()).decode() + "?= <shop@example.com>"


def test_a_long_non_ascii_display_name_becomes_several_encoded_words_on_one_line():
    name = "Ünïcödé " * 20
    sent = parse_mailbox(f"{name} <shop@example.com>").for_ses
    words = sent.removesuffix(" <shop@example.com>").split(" ")
    assert len(words) > 1 and all(len(w) <= 75 for w in words) and "\n" not in sent
    decoded = b"".join(base64.b64decode(w[len("=?utf-8?b?"):-2]) for w in words).decode()
    assert decoded == " ".join(name.split())


def test_ascii_display_names_are_quoted_only_when_they_must_be():
    assert parse_mailbox("Ada Lovelace <ada@example.org>").for_ses == "Ada Lovelace <ada@example.org>"
    assert parse_mailbox('"Lovelace, Ada" <ada@example.org>').for_ses == '"Lovelace, Ada" <ada@example.org>'
    assert parse_mailbox('"Say \\"hi\\"" <a@example.org>').for_ses == '"Say \\"hi\\"" <a@example.org>'
    assert parse_mailbox("  <ada@example.org>  ").for_ses == "ada@example.org"


def test_the_parsed_mailbox_keeps_its_parts():
    assert parse_mailbox(" Ada   Lovelace <ada@Example.org> ") == Mailbox("ada", "Example.org", "Ada Lovelace")


def test_the_ses_request_is_built_from_parsed_values_only():
    body = job("k", **{"from": "Café Shop <shop@example.com>"}, to=["jeff@臺網中心.tw", "  <b@example.org> "],
               cc="Lovelace <ada@Bücher.example>", replyTo=['"Support, EU" <help@example.com>'])
    request = build_request(parse_job(json.dumps(body), "m"), None)
    assert request["FromEmailAddress"].startswith("=?utf-8?b?") and request["FromEmailAddress"].isascii()
    assert request["Destination"] == {"ToAddresses": ["jeff@xn--fiqq24b10vi0d.tw", "b@example.org"],
                                      "CcAddresses": ["Lovelace <ada@xn--bcher-kva.example>"]}
    assert request["ReplyToAddresses"] == ['"Support, EU" <help@example.com>']


def test_sixty_addresses_joined_in_one_entry_are_refused_not_counted_as_one():
    joined = ", ".join(f"u{i}@example.org" for i in range(60))
    with pytest.raises(InvalidMessage, match="more than one address"):
        parse_job(json.dumps(job("k", to=joined)), "m")


def test_recipients_are_counted_after_parsing():
    with pytest.raises(InvalidMessage, match="51 recipients"):
        parse_job(json.dumps(job("k", to=[f"u{i}@example.org" for i in range(30)],
                                 bcc=[f"b{i}@example.org" for i in range(21)])), "m")


@pytest.mark.parametrize(("overrides", "field"), [
    ({"subject": "hi\r\nBcc: victim@example.net"}, "subject"),
    ({"subject": "hi\x00"}, "subject"),
    ({"subject": "hi\nthere"}, "subject"),
    ({"from": '"Shop\r\nBcc: x@example.net" <shop@example.com>'}, "from"),
    ({"to": ["Ada\n <ada@example.org>"]}, "to"),
    ({"replyTo": ["help@example.com\r\n"]}, "replyTo"),
    ({"tags": {"campaign": "a\r\nb"}}, "tag 'campaign'"),
])
def test_header_fields_refuse_line_breaks_and_nul(overrides, field):
    with pytest.raises(InvalidMessage) as error:
        parse_job(json.dumps(job("k", **overrides)), "m")
    assert error.value.reason.startswith(field)


def test_a_template_name_must_follow_ses_naming():
    base = {k: v for k, v in job("k").items() if k not in ("subject", "text")}
    for name in ("receipt\r\nX: y", "a b", "", "x" * 65):
        with pytest.raises(InvalidMessage, match=r"template\.name .* must be 1-64 letters"):
            parse_job(json.dumps(dict(base, template={"name": name})), "m")
    assert parse_job(json.dumps(dict(base, template={"name": "receipt_v2-EU"})), "m").content.name == "receipt_v2-EU"


@pytest.mark.parametrize(("key", "reason"), [
    ("   ", "starts or ends with white space"),
    (" receipt:1", "starts or ends with white space"),
    ("receipt:1\n", "starts or ends with white space"),
    ("receipt:\x001", "control character (U+0000)"),
    ("receipt:\x1b[31m", "control character (U+001B)"),
    ("receipt:\x85x", "control character (U+0085)"),
])
def test_keys_refuse_white_space_at_the_ends_and_control_characters(key, reason):
    with pytest.raises(InvalidMessage, match=re.escape(reason)):
        parse_job(json.dumps(job(key)), "m")


def test_keys_with_inner_spaces_and_any_script_are_allowed():
    assert parse_job(json.dumps(job("reçu 42:ユーザー")), "m").dedupe_key == "reçu 42:ユーザー"


def test_the_producer_shares_the_parser():
    with pytest.raises(InvalidJob, match="more than one address"):
        EmailJob(dedupe_key="k", sender="shop@example.com", to="a@example.org, b@example.org", subject="s", text="t")
    assert dedupe_key("order-1", recipient="Ada <Ada@Bücher.Example>") == "order-1:Ada@xn--bcher-kva.example"
    with pytest.raises(ValueError, match="starts or ends with white space"):
        dedupe_key(" order-1")
    with pytest.raises(ValueError, match="not a valid email address: it has no '@'"):
        dedupe_key("order-1", recipient="nobody")


@settings(max_examples=400, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_every_accepted_domain_label_follows_idna_2008_and_round_trips(label):
    try:
        ascii_label = to_ascii_label(label)
    except InvalidLabel as error:
        assert str(error)  # refused with a reason
        return
    assert ascii_label.isascii() and 1 <= len(ascii_label) <= 63
    assert not ascii_label.startswith("-") and not ascii_label.endswith("-")
    if ascii_label[:4].lower() == "xn--":
        decoded = ascii_label[4:].lower().encode("ascii").decode("punycode")
        assert not decoded.isascii() and decoded == label.lower()
        assert to_ascii_label(ascii_label) == ascii_label  # the A-label is accepted as it is
    else:
        assert ascii_label[2:4] != "--" and ascii_label == label


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["ada", "a.b+tag", "o'neil", "x_y"]), st.sampled_from(["example.org", "Bücher.example",
                                                                                "臺網中心.tw", "sub.example.co.uk"]),
       st.sampled_from(["{a}", "Ada <{a}>", "refused: {a}.", "{a}, {a}", "({a})", "'{a}'"]))
def test_redaction_leaves_no_address_a_reason_could_quote(local, domain, form):
    address = parse_mailbox(f"{local}@{domain}").address
    text = redact_addresses(form.format(a=address))
    assert address not in text and "@" not in text
