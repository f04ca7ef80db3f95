/**
 * The forms REDIS_URL takes. A single Redis: `redis://[user:password@]host:port[/db]`, or
 * `rediss://` for TLS, as ever. A Redis Cluster: `redis+cluster://[user:password@]host:port,host:port/`
 * (or `rediss+cluster://` for TLS), a few of its nodes separated by commas: the client learns the
 * rest from the cluster. The `+cluster` scheme, not a variable of its own, so that one value still
 * says where Redis is everywhere (web, worker, release, dev launcher) and no process can be
 * pointed at a cluster while another thinks it is a single server. No database number: a cluster
 * has only database 0. Kept free of ioredis so that config.ts can validate with it.
 */
export interface ClusterUrl {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
}

const CLUSTER_SCHEME = /^(rediss?)\+cluster:\/\//i;

export function isClusterUrl(url: string): boolean {
  return CLUSTER_SCHEME.test(url);
}

/** The problem with a REDIS_URL, in words for the configuration error; undefined when it is fine. */
export function redisUrlProblem(url: string): string | undefined {
  if (isClusterUrl(url)) {
    try {
      parseClusterUrl(url);
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  }
  if (!/^rediss?:\/\//.test(url))
    return 'must start with redis:// or rediss:// (or redis+cluster:// for a Redis Cluster)';
  if (!URL.canParse(url)) return 'is not a valid URL';
  return undefined;
}

/**
 * The nodes and credentials of a `redis+cluster://` URL; throws with a sentence on a malformed
 * one. Each node is parsed as a URL of its own, so `[::1]:7000` works as in any Redis URL.
 */
export function parseClusterUrl(url: string): ClusterUrl {
  const scheme = CLUSTER_SCHEME.exec(url);
  if (!scheme) throw new Error('is not a redis+cluster:// URL');
  const rest = url.slice(scheme[0].length);
  const at = rest.lastIndexOf('@');
  const userinfo = at >= 0 ? rest.slice(0, at) : undefined;
  const afterUser = at >= 0 ? rest.slice(at + 1) : rest;
  const slash = afterUser.search(/[/?#]/);
  const hostList = slash >= 0 ? afterUser.slice(0, slash) : afterUser;
  const tail = slash >= 0 ? afterUser.slice(slash) : '';
  if (tail !== '' && tail !== '/' && tail !== '/0')
    throw new Error(
      `names a Redis Cluster and may end with / only (found "${tail}"): a cluster has only database 0 and takes no options here`,
    );
  const nodes = hostList.split(',').map((node) => node.trim());
  if (nodes.some((node) => node === ''))
    throw new Error(
      'names a Redis Cluster but lists no node, or an empty one: redis+cluster://host1:7000,host2:7001/',
    );
  const parsed = nodes.map((node) => {
    if (!URL.canParse(`redis://${node}`) || /[@/]/.test(node))
      throw new Error(`names a Redis Cluster with a node "${node}" that is not host:port`);
    const u = new URL(`redis://${node}`);
    return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(u.port || 6379) };
  });
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    const user = decodeURIComponent(colon >= 0 ? userinfo.slice(0, colon) : userinfo);
    password = colon >= 0 ? decodeURIComponent(userinfo.slice(colon + 1)) : undefined;
    username = user || undefined;
    // redis://:password@host is the usual form of "no user, a password" (the default user).
    if (password === '') password = undefined;
  }
  return {
    nodes: parsed,
    ...(username !== undefined && { username }),
    ...(password !== undefined && { password }),
    tls: scheme[1]!.toLowerCase() === 'rediss',
  };
}

/** host:port of a Redis URL (every listed node of a cluster's), never its credentials. */
export function redisWhere(url: string): string {
  if (isClusterUrl(url)) {
    try {
      return parseClusterUrl(url)
        .nodes.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`)
        .join(',');
    } catch {
      return '(an unparsable URL)';
    }
  }
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '6379'}`;
  } catch {
    return '(an unparsable URL)';
  }
}

/**
 * One single-server URL per node of a `redis+cluster://` URL, with its credentials and TLS: to
 * ask each node on its own what the cluster client cannot tell (why no node answers).
 */
export function clusterNodeUrls(url: string): string[] {
  const { nodes, username, password, tls } = parseClusterUrl(url);
  return nodes.map(({ host, port }) => {
    const u = new URL(`${tls ? 'rediss' : 'redis'}://${host.includes(':') ? `[${host}]` : host}:${port}`);
    if (username !== undefined) u.username = encodeURIComponent(username);
    if (password !== undefined) u.password = encodeURIComponent(password);
    return u.toString();
  });
}
