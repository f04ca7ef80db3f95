import { createHash } from 'node:crypto';
import type { oas32 } from 'zod-openapi';
import { isRetryable } from '../shared/errors.js';

type ErrorTable = Record<string, { status: number; explains: string }>;
type Schemas = Record<string, unknown>;

const methods = ['get', 'put', 'post', 'patch', 'delete'] as const;
const schemaRef = '#/components/schemas/';

function esc(value: unknown): string {
  return String(value)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** The descriptions use a little Markdown: `code` and [links](https://...). Escaped first, so only these become tags. */
function inline(text: string): string {
  return esc(text)
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\[([^\]]+)\]\(((?:https?:\/\/|#)[^)\s]+)\)/g, '<a href="$2">$1</a>');
}

function paragraphs(text: string | undefined): string {
  return (text ?? '')
    .split(/\n{2,}/)
    .filter((p) => p.trim())
    .map((p) => `<p>${inline(p.trim())}</p>`)
    .join('\n');
}

function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

function isRef(value: object): value is oas32.ReferenceObject {
  return '$ref' in value;
}

/** Readers of one operation should not chase `$ref`s, so components are inlined (titled) except on a cycle. */
function inlineRefs(node: unknown, schemas: Schemas, seen: string[] = []): unknown {
  if (Array.isArray(node)) return node.map((item) => inlineRefs(item, schemas, seen));
  if (!node || typeof node !== 'object') return node;
  const { $ref, ...rest } = node as { $ref?: unknown };
  if (typeof $ref === 'string' && $ref.startsWith(schemaRef)) {
    const name = $ref.slice(schemaRef.length);
    const target = schemas[name];
    if (target && !seen.includes(name)) {
      return { title: name, ...(inlineRefs(target, schemas, [...seen, name]) as object), ...rest };
    }
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, inlineRefs(v, schemas, seen)]));
}

function schemaBlock(schema: unknown, schemas: Schemas): string {
  return `<pre>${esc(JSON.stringify(inlineRefs(schema, schemas), null, 2))}</pre>`;
}

function contentBlock(content: oas32.ContentObject | undefined, schemas: Schemas): string {
  return Object.entries(content ?? {})
    .map(
      ([type, media]) =>
        `<p><code>${esc(type)}</code></p>${schemaBlock(isRef(media) ? media : media.schema, schemas)}` +
        (!isRef(media) && media.example !== undefined
          ? `<p>Example</p><pre>${esc(JSON.stringify(media.example, null, 2))}</pre>`
          : ''),
    )
    .join('');
}

function parametersBlock(parameters: oas32.OperationObject['parameters']): string {
  if (!parameters?.length) return '';
  const rows = parameters.map((p) =>
    isRef(p)
      ? `<tr><td colspan="4"><code>${esc(p.$ref)}</code></td></tr>`
      : `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${p.required ? 'yes' : 'no'}</td>` +
        `<td>${p.description ? `${inline(p.description)}<br>` : ''}<code>${esc(JSON.stringify(p.schema ?? {}))}</code></td></tr>`,
  );
  return `<h4>Parameters</h4>
<table><thead><tr><th>Name</th><th>In</th><th>Required</th><th>Schema</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function requestBodyBlock(body: oas32.OperationObject['requestBody'], schemas: Schemas): string {
  if (!body) return '';
  if (isRef(body)) return `<h4>Request body</h4><p><code>${esc(body.$ref)}</code></p>`;
  return `<h4>Request body <small>(${body.required ? 'required' : 'optional'})</small></h4>${contentBlock(body.content, schemas)}`;
}

function responseBlock(
  status: string,
  response: oas32.ResponseObject | oas32.ReferenceObject,
  schemas: Schemas,
): string {
  if (isRef(response)) return `<h5>${esc(status)}</h5><p><code>${esc(response.$ref)}</code></p>`;
  const codes = response['x-error-codes'] as string[] | undefined;
  if (codes) {
    // The shared envelope is shown once, in the Errors section.
    const links = codes.map((c) => `<a href="#error-${esc(c)}"><code>${esc(c)}</code></a>`).join(', ');
    return `<h5>${esc(status)}</h5><p>Error codes: ${links}. Body: <a href="#errors">ErrorEnvelope</a>.</p>`;
  }
  return `<h5>${esc(status)}</h5>${paragraphs(response.description)}${contentBlock(response.content, schemas)}`;
}

function securityText(security: oas32.SecurityRequirementObject[] | undefined): string {
  if (!security?.length) return 'none';
  return security
    .map((req) =>
      Object.keys(req)
        .map((name) => `<a href="#auth-${esc(name)}">${esc(name)}</a>`)
        .join(' + '),
    )
    .join(' or ');
}

interface Operation {
  method: string;
  path: string;
  op: oas32.OperationObject;
}

function operationBlock({ method, path, op }: Operation, schemas: Schemas): string {
  const responses = Object.entries(op.responses ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return `<article class="op" id="op-${esc(op.operationId)}">
<h3><span class="method ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></h3>
<p><strong>${esc(op.summary ?? '')}</strong> <small>operationId <code>${esc(op.operationId)}</code></small></p>
${paragraphs(op.description)}
<p>Authentication: ${securityText(op.security)}</p>
${parametersBlock(op.parameters)}
${requestBodyBlock(op.requestBody, schemas)}
<h4>Responses</h4>
${responses.map(([status, response]) => responseBlock(status, response, schemas)).join('\n')}
</article>`;
}

function groupByTag(doc: oas32.OpenAPIObject): Map<string, Operation[]> {
  const groups = new Map<string, Operation[]>();
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of methods) {
      const op = item[method];
      if (!op) continue;
      const tag = op.tags?.[0] ?? 'Other';
      groups.set(tag, [...(groups.get(tag) ?? []), { method, path, op }]);
    }
  }
  return groups;
}

function errorsSection(errorTable: ErrorTable, schemas: Schemas): string {
  const rows = Object.entries(errorTable)
    .sort(([, a], [, b]) => a.status - b.status)
    .map(
      ([code, { status, explains }]) =>
        `<tr id="error-${esc(code)}"><td>${status}</td><td><code>${esc(code)}</code></td>` +
        `<td>${inline(explains)}</td><td>${isRetryable(status) ? 'yes' : 'no'}</td></tr>`,
    );
  return `<section id="errors"><h2>Errors</h2>
<p>Every error response carries one <code>error</code> object. Match on <code>code</code>, never on <code>message</code>. Retry only when <code>retryable</code> is true (429 and 5xx), with exponential backoff and jitter.</p>
${schemas.ErrorEnvelope ? schemaBlock(schemas.ErrorEnvelope, schemas) : ''}
<table><thead><tr><th>HTTP</th><th>Code</th><th>Explanation</th><th>Retryable</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table></section>`;
}

const css = `
body{margin:0;font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#fff}
.layout{display:grid;grid-template-columns:260px minmax(0,1fr);max-width:1280px;margin:0 auto}
nav{position:sticky;top:0;align-self:start;max-height:100vh;overflow:auto;padding:24px 16px;border-right:1px solid #e3e6ec;font-size:14px}
nav ul{list-style:none;padding-left:12px;margin:4px 0}nav a{color:#2a4fa8;text-decoration:none}nav a:hover{text-decoration:underline}
main{padding:24px 40px;min-width:0}h1{margin-top:0}h2{border-bottom:2px solid #e3e6ec;padding-bottom:4px;margin-top:48px}
.op{border:1px solid #e3e6ec;border-radius:8px;padding:4px 20px 12px;margin:20px 0}h5{margin:12px 0 4px;font-size:14px}
.method{display:inline-block;min-width:56px;text-align:center;border-radius:4px;padding:1px 6px;color:#fff;font-size:13px}
.get{background:#1f7a4d}.post{background:#2a4fa8}.patch{background:#9a5b00}.put{background:#6b3fa0}.delete{background:#b3261e}
code{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f3f5f8;padding:1px 4px;border-radius:3px}
pre{background:#f6f8fa;border:1px solid #e3e6ec;border-radius:6px;padding:12px;overflow:auto;font-size:12.5px;max-height:480px}
table{border-collapse:collapse;width:100%;font-size:14px}th,td{border:1px solid #e3e6ec;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}tr:target{background:#fff6d6}small{color:#5d6678}
@media (max-width:800px){.layout{display:block}nav{position:static;max-height:none;border:0}main{padding:16px}}`;

/** The page is static HTML and its one <style>: no scripts, images, fonts or fetches, never framed. */
export const docsPageCsp = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(css).digest('base64')}'`,
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function renderDocsPage(doc: oas32.OpenAPIObject, errorTable: ErrorTable): string {
  const schemas = (doc.components?.schemas ?? {}) as Schemas;
  const groups = groupByTag(doc);
  const schemes = Object.entries(doc.components?.securitySchemes ?? {}).map(([name, scheme]) =>
    isRef(scheme)
      ? ''
      : `<dt id="auth-${esc(name)}"><code>${esc(name)}</code>: HTTP ${esc(scheme.scheme ?? scheme.type)}</dt><dd>${inline(scheme.description ?? '')}</dd>`,
  );
  const toc = [...groups]
    .map(
      ([tag, ops]) =>
        `<li><a href="#tag-${esc(slug(tag))}">${esc(tag)}</a><ul>` +
        ops
          .map(
            ({ op }) =>
              `<li><a href="#op-${esc(op.operationId)}">${esc(op.summary ?? op.operationId)}</a></li>`,
          )
          .join('') +
        '</ul></li>',
    )
    .join('\n');
  const sections = [...groups]
    .map(
      ([tag, ops]) =>
        `<section id="tag-${esc(slug(tag))}"><h2>${esc(tag)}</h2>\n${ops.map((o) => operationBlock(o, schemas)).join('\n')}</section>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(doc.info.title)} ${esc(doc.info.version)}</title>
<style>${css}</style>
</head>
<body>
<div class="layout">
<nav><strong>Contents</strong><ul>
<li><a href="#introduction">Introduction</a></li>
<li><a href="#authentication">Authentication</a></li>
${toc}
<li><a href="#errors">Errors</a></li>
<li><a href="/openapi.json">openapi.json</a></li>
</ul></nav>
<main>
<section id="introduction"><h1>${esc(doc.info.title)} <small>${esc(doc.info.version)}</small></h1>
${paragraphs(doc.info.description)}
<p>Base URL: ${(doc.servers ?? []).map((s) => `<code>${esc(s.url)}</code>`).join(', ')}. Machine-readable description: <a href="/openapi.json">openapi.json</a> (OpenAPI ${esc(doc.openapi)}).</p>
</section>
<section id="authentication"><h2>Authentication</h2><dl>${schemes.join('\n')}</dl></section>
${sections}
${errorsSection(errorTable, schemas)}
</main>
</div>
</body>
</html>
`;
}
