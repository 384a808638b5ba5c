import collections, glob, gzip, json, os
for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), '*[0-9].json.gz'))):
    d = json.load(gzip.open(f))
    st = collections.Counter(r['status'] for r in d['results'])
    cr = {}
    for r in d['results']:
        if r['kernel'].endswith('_cr') and r.get('correctly_rounded') is not None:
            k = (r['kernel'])
            cr[k] = min(cr.get(k, 2), r['correctly_rounded'])
    ops = sorted(set(r['op'] for r in d['results']))
    kernels = sorted(set(r['kernel'] for r in d['results']))
    print(f.split('/')[-1], 'pass' if d['pass'] else 'FAIL', dict(st), 'seconds %.0f' % d['seconds'], 'ops', ','.join(ops), 'kernels', ','.join(kernels), 'min correctly_rounded', cr)
