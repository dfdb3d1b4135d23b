"""Realistic tool outputs with planted credentials, to measure how many a redactor withholds.

Every secret is generated (seeded) in the shape its issuer uses, and planted in the kind of text a tool
returns: an `env` dump, a config file, a CI log, a cloud CLI's JSON, a `.npmrc`, a connection string. None
of them is a real credential.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

__all__ = ('PlantedSecret', 'corpus', 'encoded_shapes')

_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + '234567'
_B64 = string.ascii_letters + string.digits + '+/'
_URLSAFE = string.ascii_letters + string.digits + '-_'


@dataclass(frozen=True)
class PlantedSecret:
    """One credential, the text it sits in, and its category."""

    category: str
    secret: str
    text: str


def _pick(rng: random.Random, alphabet: str, length: int) -> str:
    return ''.join(rng.choice(alphabet) for _ in range(length))


def _jwt(rng: random.Random) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip('=')

    header = part({'alg': 'HS256', 'typ': 'JWT'})
    payload = part({'sub': f'user-{rng.randint(1, 10**6)}', 'iat': 1714550000 + rng.randint(0, 10**6)})
    return f'{header}.{payload}.{_pick(rng, _URLSAFE, 43)}'


def _pem(rng: random.Random, label: str) -> str:
    body = base64.b64encode(rng.randbytes(rng.choice([256, 600, 1190]))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return '\n'.join([f'-----BEGIN {label}-----', *lines, f'-----END {label}-----'])


def corpus(seed: int = 41, per_kind: int = 4) -> list[PlantedSecret]:
    """`per_kind` planted secrets of every kind, each in its own realistic text."""
    rng = random.Random(seed)
    planted: list[PlantedSecret] = []

    def plant(category: str, secret: str, text: str) -> None:
        assert secret in text
        planted.append(PlantedSecret(category, secret, text))

    for _ in range(per_kind):
        access = 'AKIA' + _pick(rng, _UPPER_DIGITS, 16)
        session = 'ASIA' + _pick(rng, _UPPER_DIGITS, 16)
        secret = _pick(rng, _B64, 40)
        plant('cloud: AWS access key id', access, f'[default]\naws_access_key_id = {access}\nregion = eu-west-1\n')
        plant(
            'cloud: AWS secret key',
            secret,
            f'AWS_ACCESS_KEY_ID={access}\nAWS_SECRET_ACCESS_KEY={secret}\nAWS_DEFAULT_REGION=us-east-1\n',
        )
        plant(
            'cloud: AWS STS JSON',
            session,
            json.dumps({'Credentials': {'AccessKeyId': session, 'Expiration': '2024-05-01T13:00:00Z'}}, indent=2),
        )
        plant(
            'cloud: AWS STS JSON secret',
            secret,
            json.dumps(
                {'Credentials': {'SecretAccessKey': secret, 'SessionToken': 'FwoGZXIvYXdzE' + _pick(rng, _B64, 80)}}
            ),
        )
        google = 'AIza' + _pick(rng, _URLSAFE, 35)
        plant('cloud: Google API key', google, f'curl "https://maps.googleapis.com/maps/api/geocode/json?key={google}"')
        pem = _pem(rng, 'PRIVATE KEY')
        service_account = {'type': 'service_account', 'project_id': 'acme-prod', 'private_key': pem + '\n'}
        plant('cloud: GCP service account key', pem.split('\n')[1], json.dumps(service_account))
        azure = base64.b64encode(rng.randbytes(64)).decode()
        plant(
            'cloud: Azure storage key',
            azure,
            f'DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={azure};EndpointSuffix=core.windows.net',
        )
        openai = 'sk-proj-' + _pick(rng, _URLSAFE, 80) + 'T3BlbkFJ' + _pick(rng, _URLSAFE, 40)
        plant('provider: OpenAI key', openai, f'export OPENAI_API_KEY="{openai}"')
        plant('provider: OpenAI key in a log', openai, f'2024-05-01 12:00:01 DEBUG client init key={openai} org=acme')
        anthropic = 'sk-ant-api03-' + _pick(rng, _URLSAFE, 93) + 'AA'
        plant('provider: Anthropic key', anthropic, f'ANTHROPIC_API_KEY={anthropic}\n')
        stripe = 'sk_live_' + _pick(rng, _ALNUM, 24)
        plant('provider: Stripe key', stripe, f'stripe.api_key = "{stripe}"')
        sendgrid = f'SG.{_pick(rng, _URLSAFE, 22)}.{_pick(rng, _URLSAFE, 43)}'
        plant('provider: SendGrid key', sendgrid, f'SENDGRID_API_KEY={sendgrid}')
        twilio = 'SK' + _pick(rng, string.ascii_lowercase + string.digits, 32)
        plant('provider: Twilio key', twilio, f'twilio api:core:keys:list\n{twilio}  ci-deploy  2024-04-01')
        npm = 'npm_' + _pick(rng, _ALNUM, 36)
        plant('provider: npm token', npm, f'//registry.npmjs.org/:_authToken={npm}\n')
        github = 'ghp_' + _pick(rng, _ALNUM, 36)
        plant(
            'GitHub token',
            github,
            f'remote: Invalid username or token. Token used: {github}\nfatal: Authentication failed',
        )
        fine = 'github_pat_' + _pick(rng, _ALNUM, 22) + '_' + _pick(rng, _ALNUM, 59)
        plant('GitHub fine-grained token', fine, f'GH_TOKEN={fine}')
        gitlab = 'glpat-' + _pick(rng, _URLSAFE, 20)
        plant('GitLab token', gitlab, f'git clone https://oauth2:{gitlab}@gitlab.com/acme/api.git')
        plant('GitLab token in CI', gitlab, f'$ echo "token: {gitlab}"\ntoken: {gitlab}')
        slack = f'xoxb-{rng.randint(10**10, 10**11)}-{rng.randint(10**11, 10**12)}-{_pick(rng, _ALNUM, 24)}'
        plant('Slack bot token', slack, f'SLACK_BOT_TOKEN={slack}')
        user = f'xoxp-{rng.randint(10**10, 10**11)}-{rng.randint(10**10, 10**11)}-{rng.randint(10**11, 10**12)}-{_pick(rng, string.hexdigits.lower(), 32)}'
        plant('Slack user token', user, json.dumps({'ok': True, 'access_token': user, 'scope': 'chat:write'}))
        hook = f'https://hooks.slack.com/services/T{_pick(rng, _UPPER_DIGITS, 8)}/B{_pick(rng, _UPPER_DIGITS, 10)}/{_pick(rng, _ALNUM, 24)}'
        plant('Slack webhook', hook.rsplit('/', 1)[1], f'notify: {hook}')
        jwt = _jwt(rng)
        plant('JWT', jwt, f'> GET /api/me HTTP/1.1\n> Authorization: Bearer {jwt}\n< HTTP/1.1 200 OK')
        plant('JWT in JSON', jwt, json.dumps({'id_token': jwt, 'expires_in': 3600}))
        for label in ('RSA PRIVATE KEY', 'OPENSSH PRIVATE KEY', 'EC PRIVATE KEY'):
            block = _pem(rng, label)
            plant(f'private key ({label})', block.split('\n')[2], f'$ cat ~/.ssh/id\n{block}\n$ ')
        password = _pick(rng, _ALNUM, 12) + rng.choice('!%^*~')
        plant('password in URL', password, f'DATABASE_URL=postgres://app:{password}@db.internal:5432/app')
        plant(
            'password in URL (mongo)',
            password,
            f'connecting to mongodb+srv://admin:{password}@cluster0.abcd.mongodb.net/prod',
        )
        plant('password in URL (https)', password, f'fetching https://deploy:{password}@artifacts.acme.io/pkg.tgz')
        db = _pick(rng, _ALNUM, 16)
        plant('KEY=value: DB_PASSWORD', db, f'DB_HOST=db.internal\nDB_USER=app\nDB_PASSWORD={db}\n')
        plant('KEY=value: yaml password', db, f'database:\n  host: db.internal\n  password: "{db}"\n')
        plant('KEY=value: JSON client_secret', db, json.dumps({'client_id': 'web-app', 'client_secret': db}))
        django = _pick(rng, _ALNUM + '!@#%^&*(-_=+)', 50).replace('"', '').replace("'", '')
        plant('KEY=value: SECRET_KEY', django, f"SECRET_KEY = '{django}'")
        api = _pick(rng, string.hexdigits.lower(), 32)
        plant('KEY=value: api_key', api, f'api_key: {api}')
        token = _pick(rng, _ALNUM, 40)
        plant('KEY=value: AUTH_TOKEN', token, f'export AUTH_TOKEN={token}')
    return planted


def encoded_shapes(seed: int = 24, per_kind: int = 4) -> list[PlantedSecret]:
    """Secrets as tools return them escaped or encoded (issue 24, item 5): none of them was withheld at 34bbde9."""
    rng = random.Random(seed)
    planted: list[PlantedSecret] = []

    def pick(length: int) -> str:
        return _pick(rng, _ALNUM, length)

    for _ in range(per_kind):
        password = pick(14) + rng.choice('!%^*~')
        applied = {
            'apiVersion': 'v1',
            'kind': 'Secret',
            'metadata': {'name': 'db', 'namespace': 'prod'},
            'stringData': {'password': password, 'username': 'app'},
        }
        kubectl = {
            'apiVersion': 'v1',
            'kind': 'Secret',
            'metadata': {
                'annotations': {'kubectl.kubernetes.io/last-applied-configuration': json.dumps(applied) + '\n'},
                'name': 'db',
            },
            'type': 'Opaque',
        }
        planted.append(PlantedSecret('encoded: kubectl last-applied-configuration', password, json.dumps(kubectl)))
        planted.append(
            PlantedSecret(
                'encoded: JSON in a JSON string',
                password,
                json.dumps({'job': 'etl', 'settings': json.dumps({'db': {'password': password}})}),
            )
        )
        planted.append(
            PlantedSecret(
                'encoded: JSON in a JSON string in a JSON string',
                password,
                json.dumps({'event': json.dumps({'payload': json.dumps({'client_secret': password})})}),
            )
        )
        planted.append(
            PlantedSecret(
                'encoded: escaped slashes',
                password,
                '{"dsn":"postgres:\\/\\/app:' + password + '@db.internal:5432\\/app"}',
            )
        )
        key = base64.b64encode(rng.randbytes(600)).decode()
        pem = '-----BEGIN RSA PRIVATE KEY-----\n' + '\n'.join(key[i : i + 64] for i in range(0, len(key), 64))
        tls_key = base64.b64encode((pem + '\n-----END RSA PRIVATE KEY-----\n').encode()).decode()
        planted.append(
            PlantedSecret(
                'encoded: base64 private key in a Kubernetes secret',
                tls_key[40:120],
                f'apiVersion: v1\ndata:\n  tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n  tls.key: {tls_key}\nkind: Secret\n'
                'type: kubernetes.io/tls\n',
            )
        )
    return planted
