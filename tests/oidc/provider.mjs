// An OpenID provider for the tests (tests/oidc_support.py starts it): oidc-provider with the
// client-credentials grant and resource indicators, so that each client gets an RFC 9068
// access token (typ at+jwt) for a resource (its aud), signed RS256 by the first RSA key of
// the key set the test wrote. Environment: OIDC_PORT, OIDC_KEYS (a JWKS file with private
// keys), OIDC_AUDIENCE (the default resource), OIDC_CLIENTS (a JSON list of client ids; each
// one's secret is "<id>-secret").
import fs from 'node:fs';

import Provider from 'oidc-provider';

const port = Number(process.env.OIDC_PORT);
const issuer = `http://127.0.0.1:${port}`;
const jwks = JSON.parse(fs.readFileSync(process.env.OIDC_KEYS, 'utf8'));
const audience = process.env.OIDC_AUDIENCE;
const clients = JSON.parse(process.env.OIDC_CLIENTS).map((id) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: 'client_secret_post',
}));

const provider = new Provider(issuer, {
  clients,
  jwks,
  cookies: { keys: ['tests-only'] },
  ttl: { ClientCredentials: 300 },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'a2a',
        audience: resource,
        accessTokenTTL: 300,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider serving ${issuer}`);
});
