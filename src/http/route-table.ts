// Which methods does a concrete path have? Fed every route as it is added; read by the 405
// handler (Allow) and by CORS (OPTIONS). Built once at start-up.
import FindMyWay from 'find-my-way';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type Method = (typeof METHODS)[number] | 'OPTIONS';

export class RouteTable {
  readonly #router = FindMyWay({ ignoreTrailingSlash: false });

  add(methods: string | string[], url: string): void {
    for (const method of [methods].flat()) {
      if (!(METHODS as readonly string[]).includes(method)) continue;
      if (!this.#router.hasRoute(method as 'GET', url)) this.#router.on(method as 'GET', url, () => {});
    }
  }

  /** The methods the path answers, OPTIONS included when it answers any; [] when it is unknown. */
  allowed(path: string): Method[] {
    const found: Method[] = METHODS.filter((m) => this.#router.find(m, path) !== null);
    return found.length > 0 ? [...found, 'OPTIONS'] : [];
  }
}
