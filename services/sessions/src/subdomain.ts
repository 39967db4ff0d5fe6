const RESERVED = new Set(['www', 'api', 'app', 'admin', 'mail', 'docs', 'status', 'dashboard', 'static']);

/**
 * A DNS-safe label from an agent's name: lowercase ASCII letters, digits and single hyphens, no hyphen at
 * either end, at most 50 characters so a `-N` suffix still fits the 63-character label limit.
 */
export function subdomainBase(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 50)
    .replace(/-+$/g, '');
  if (slug === '') return 'agent';
  if (RESERVED.has(slug)) return `${slug}-agent`;
  return slug;
}
