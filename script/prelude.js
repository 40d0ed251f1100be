// The Node.js surface injected functions see, and the calls the engine
// makes into them. It runs once per engine; __host is the engine's Go side
// (engine.go) and is removed from the global scope before any user code
// runs. Nothing here is mountebank's code: it is written to the contract
// its documentation gives (see CONTRIBUTING.md, "JavaScript injection").
(function (g, host) {
    'use strict';

    // ---- util ----
    function inspect(v) {
        if (typeof v === 'string') { return "'" + v + "'"; }
        if (typeof v === 'function') { return '[Function' + (v.name ? ': ' + v.name : ' (anonymous)') + ']'; }
        if (v === undefined) { return 'undefined'; }
        if (v instanceof Error) { return v.stack || String(v); }
        try {
            var s = JSON.stringify(v);
            return s === undefined ? String(v) : s;
        } catch (e) {
            return String(v);
        }
    }
    function format(f) {
        var args = Array.prototype.slice.call(arguments, 1);
        var out;
        if (typeof f !== 'string') {
            args.unshift(f);
            out = '';
        } else {
            out = f.replace(/%[sdifjoO%]/g, function (m) {
                if (m === '%%') { return '%'; }
                if (args.length === 0) { return m; }
                var a = args.shift();
                switch (m) {
                case '%s': return typeof a === 'string' ? a : (typeof a === 'object' && a !== null ? inspect(a) : String(a));
                case '%d': return String(Number(a));
                case '%i': return String(parseInt(a, 10));
                case '%f': return String(parseFloat(a));
                case '%j': try { return JSON.stringify(a); } catch (e) { return '[Circular]'; }
                default: return inspect(a);
                }
            });
        }
        for (var i = 0; i < args.length; i++) {
            out += (out === '' ? '' : ' ') + (typeof args[i] === 'string' ? args[i] : inspect(args[i]));
        }
        return out;
    }
    var util = { format: format, inspect: inspect, isDeepStrictEqual: function (a, b) { return JSON.stringify(a) === JSON.stringify(b); } };

    // ---- Buffer: a Uint8Array with Node's common methods ----
    function bytesOf(u8) { return u8.buffer.slice(u8.byteOffset, u8.byteOffset + u8.byteLength); }
    class Buffer extends Uint8Array {
        static from(x, enc, len) {
            if (typeof x === 'string') { return new Buffer(host.decode(x, enc || 'utf8')); }
            if (x instanceof ArrayBuffer) { return new Buffer(x, enc || 0, len === undefined ? x.byteLength - (enc || 0) : len); }
            if (x instanceof Uint8Array) { return new Buffer(bytesOf(x)); }
            if (x && x.type === 'Buffer' && Array.isArray(x.data)) { x = x.data; }
            if (x && typeof x.length === 'number') {
                var b = new Buffer(x.length);
                for (var i = 0; i < x.length; i++) { b[i] = x[i] & 255; }
                return b;
            }
            throw new TypeError('The first argument must be of type string, Buffer, ArrayBuffer or Array');
        }
        static alloc(n, fill) {
            var b = new Buffer(n);
            if (fill !== undefined) { b.fill(typeof fill === 'string' ? fill.charCodeAt(0) : fill); }
            return b;
        }
        static allocUnsafe(n) { return new Buffer(n); }
        static isBuffer(b) { return b instanceof Buffer; }
        static byteLength(s, enc) { return typeof s === 'string' ? host.decode(s, enc || 'utf8').byteLength : s.byteLength; }
        static concat(list, total) {
            var n = 0;
            list.forEach(function (b) { n += b.length; });
            var out = new Buffer(total === undefined ? n : total), at = 0;
            list.forEach(function (b) {
                for (var i = 0; i < b.length && at < out.length; i++) { out[at++] = b[i]; }
            });
            return out;
        }
        toString(enc, start, end) {
            var s = start || 0, e = end === undefined ? this.length : end;
            return host.encode(bytesOf(this.subarray(s, e)), enc || 'utf8');
        }
        toJSON() { return { type: 'Buffer', data: Array.prototype.slice.call(this) }; }
        equals(o) {
            if (this.length !== o.length) { return false; }
            for (var i = 0; i < this.length; i++) { if (this[i] !== o[i]) { return false; } }
            return true;
        }
        slice(s, e) { return this.subarray(s, e); }
        subarray(s, e) {
            var u = Uint8Array.prototype.subarray.call(this, s, e);
            return new Buffer(u.buffer, u.byteOffset, u.length);
        }
        write(str, offset, enc) {
            var src = new Uint8Array(host.decode(str, enc || 'utf8')), at = offset || 0, i = 0;
            for (; i < src.length && at + i < this.length; i++) { this[at + i] = src[i]; }
            return i;
        }
        indexOf(v, from) {
            if (typeof v === 'number') { return Uint8Array.prototype.indexOf.call(this, v, from); }
            var needle = typeof v === 'string' ? Buffer.from(v) : v;
            outer: for (var i = from || 0; i + needle.length <= this.length; i++) {
                for (var j = 0; j < needle.length; j++) { if (this[i + j] !== needle[j]) { continue outer; } }
                return i;
            }
            return -1;
        }
        includes(v, from) { return this.indexOf(v, from) >= 0; }
        view() { return new DataView(this.buffer, this.byteOffset, this.byteLength); }
        readUInt8(o) { return this.view().getUint8(o || 0); }
        readInt8(o) { return this.view().getInt8(o || 0); }
        readUInt16BE(o) { return this.view().getUint16(o || 0); }
        readUInt16LE(o) { return this.view().getUint16(o || 0, true); }
        readInt16BE(o) { return this.view().getInt16(o || 0); }
        readInt16LE(o) { return this.view().getInt16(o || 0, true); }
        readUInt32BE(o) { return this.view().getUint32(o || 0); }
        readUInt32LE(o) { return this.view().getUint32(o || 0, true); }
        readInt32BE(o) { return this.view().getInt32(o || 0); }
        readInt32LE(o) { return this.view().getInt32(o || 0, true); }
        readFloatBE(o) { return this.view().getFloat32(o || 0); }
        readDoubleBE(o) { return this.view().getFloat64(o || 0); }
        writeUInt8(v, o) { this.view().setUint8(o || 0, v); return (o || 0) + 1; }
        writeUInt16BE(v, o) { this.view().setUint16(o || 0, v); return (o || 0) + 2; }
        writeUInt32BE(v, o) { this.view().setUint32(o || 0, v); return (o || 0) + 4; }
        writeInt32BE(v, o) { this.view().setInt32(o || 0, v); return (o || 0) + 4; }
    }
    ['readUint8', 'readUint16BE', 'readUint16LE', 'readUint32BE', 'readUint32LE'].forEach(function (n) {
        Buffer.prototype[n] = Buffer.prototype[n.replace('Uint', 'UInt')];
    });

    // ---- events ----
    class EventEmitter {
        on(name, fn) {
            this._ev = this._ev || {};
            (this._ev[name] = this._ev[name] || []).push(fn);
            return this;
        }
        addListener(name, fn) { return this.on(name, fn); }
        once(name, fn) {
            var self = this;
            function w() { self.removeListener(name, w); return fn.apply(self, arguments); }
            return this.on(name, w);
        }
        removeListener(name, fn) {
            var l = this._ev && this._ev[name];
            if (l) { var i = l.indexOf(fn); if (i >= 0) { l.splice(i, 1); } }
            return this;
        }
        off(name, fn) { return this.removeListener(name, fn); }
        emit(name) {
            var l = this._ev && this._ev[name], args = Array.prototype.slice.call(arguments, 1);
            if (!l || l.length === 0) {
                if (name === 'error') { throw args[0]; }
                return false;
            }
            l.slice().forEach(function (fn) { fn.apply(this, args); }, this);
            return true;
        }
    }

    // ---- http, https: one outbound request, answered whole ----
    function httpModule(scheme) {
        function request(a, b, c) {
            var opts = {}, cb;
            if (typeof a === 'string' || (a && a.href)) {
                var u = host.parseURL(String(a.href || a));
                opts = { protocol: u.protocol, hostname: u.hostname, port: u.port, path: u.path };
                if (typeof b === 'object' && b !== null) { Object.assign(opts, b); cb = c; } else { cb = b; }
            } else {
                opts = Object.assign({}, a);
                cb = b;
            }
            var req = new EventEmitter(), chunks = [], sent = false;
            if (cb) { req.once('response', cb); }
            req.setHeader = function (k, v) { opts.headers = opts.headers || {}; opts.headers[k] = v; };
            req.getHeader = function (k) { return opts.headers && opts.headers[k]; };
            req.setTimeout = function (ms, fn) { if (fn) { req.once('timeout', fn); } return req; };
            req.abort = req.destroy = function () { sent = true; };
            req.write = function (d, enc) {
                chunks.push(typeof d === 'string' ? Buffer.from(d, enc) : Buffer.from(d));
                return true;
            };
            req.end = function (d, enc) {
                if (typeof d === 'function') { req.once('finish', d); d = undefined; }
                if (d !== undefined && d !== null) { req.write(d, enc); }
                if (sent) { return req; }
                sent = true;
                var headers = [];
                Object.keys(opts.headers || {}).forEach(function (k) {
                    var v = opts.headers[k];
                    (Array.isArray(v) ? v : [v]).forEach(function (x) { headers.push([k, String(x)]); });
                });
                var proto = (opts.protocol || scheme + ':').replace(/:$/, '');
                var hostname = opts.hostname || (opts.host || 'localhost').replace(/:\d+$/, '');
                var port = opts.port || ((opts.host || '').match(/:(\d+)$/) || [])[1] || (proto === 'https' ? 443 : 80);
                host.http({
                    scheme: proto, host: hostname, port: Number(port), method: (opts.method || 'GET').toUpperCase(),
                    path: opts.path || '/', headers: headers, body: bytesOf(Buffer.concat(chunks))
                }, function (err, status, resHeaders, body) {
                    if (err) {
                        var e = new Error(err);
                        e.code = 'ECONNREFUSED';
                        req.emit('error', e);
                        return;
                    }
                    var res = new EventEmitter(), enc;
                    res.statusCode = status;
                    res.headers = {};
                    res.rawHeaders = [];
                    resHeaders.forEach(function (h) {
                        var k = h[0].toLowerCase();
                        res.rawHeaders.push(h[0], h[1]);
                        res.headers[k] = res.headers[k] === undefined ? h[1] : res.headers[k] + ', ' + h[1];
                    });
                    res.setEncoding = function (x) { enc = x; return res; };
                    res.resume = function () { return res; };
                    req.emit('response', res);
                    var buf = new Buffer(body);
                    if (buf.length > 0) { res.emit('data', enc ? buf.toString(enc) : buf); }
                    res.emit('end');
                });
                return req;
            };
            return req;
        }
        function get(a, b, c) { var r = request(a, b, c); r.end(); return r; }
        return { request: request, get: get, STATUS_CODES: {} };
    }

    var modules = { util: util, buffer: { Buffer: Buffer }, http: httpModule('http'), https: httpModule('https'), events: EventEmitter };
    modules['node:util'] = modules.util;
    modules['node:buffer'] = modules.buffer;
    modules['node:http'] = modules.http;
    modules['node:https'] = modules.https;
    modules['node:events'] = modules.events;
    EventEmitter.EventEmitter = EventEmitter;

    function require(name) {
        if (Object.prototype.hasOwnProperty.call(modules, name)) { return modules[name]; }
        var e = new Error("Cannot find module '" + name + "': fenceline's injected JavaScript can require only http, https, util, buffer and events");
        e.code = 'MODULE_NOT_FOUND';
        throw e;
    }

    var console = {};
    ['log', 'info', 'warn', 'error', 'debug'].forEach(function (level) {
        console[level] = function () { host.log(level === 'log' ? 'info' : level, format.apply(null, arguments)); };
    });

    function makeLogger(scope) {
        var l = { scopePrefix: scope };
        ['debug', 'info', 'warn', 'error'].forEach(function (level) {
            l[level] = function () {
                var args = Array.prototype.slice.call(arguments);
                if (typeof args[0] === 'string') { args[0] = scope + args[0]; } else { args.unshift(scope); }
                host.log(level, format.apply(null, args));
            };
        });
        return l;
    }

    var process = { env: host.env, platform: 'linux', argv: [], version: 'v20.0.0', versions: {},
        nextTick: function (fn) { var a = Array.prototype.slice.call(arguments, 1); Promise.resolve().then(function () { fn.apply(null, a); }); },
        cwd: function () { return '/'; } };

    Object.defineProperty(g, 'require', { value: require });
    Object.defineProperty(g, 'Buffer', { value: Buffer });
    Object.defineProperty(g, 'process', { value: process });
    Object.defineProperty(g, 'console', { value: console });
    Object.defineProperty(g, 'setTimeout', { value: function (fn, ms) { return host.timer(fn, Number(ms) || 0, false, Array.prototype.slice.call(arguments, 2)); } });
    Object.defineProperty(g, 'setInterval', { value: function (fn, ms) { return host.timer(fn, Number(ms) || 0, true, Array.prototype.slice.call(arguments, 2)); } });
    Object.defineProperty(g, 'setImmediate', { value: function (fn) { return host.timer(fn, 0, false, Array.prototype.slice.call(arguments, 1)); } });
    Object.defineProperty(g, 'clearTimeout', { value: function (id) { host.clear(id); } });
    Object.defineProperty(g, 'clearInterval', { value: function (id) { host.clear(id); } });
    Object.defineProperty(g, 'clearImmediate', { value: function (id) { host.clear(id); } });
    Object.defineProperty(g, 'queueMicrotask', { value: function (fn) { Promise.resolve().then(fn); } });

    // ---- the calls the engine makes ----
    var logger = makeLogger(host.scope);
    var S = { state: {}, injectState: {} };

    // downcast copies the request's fields onto config for functions
    // written to the old interface (function (request) {...}), as
    // mountebank does for http requests and tcp requests with data.
    function downcast(config) {
        if (config.request.method || config.request.data) {
            Object.keys(config.request).forEach(function (k) { config[k] = config.request[k]; });
        }
    }
    function finish(box, r) {
        if (r !== undefined && r !== null && typeof r.then === 'function') {
            r.then(function (v) { box.settle(v); }, function (e) { box.fail(e); });
        } else {
            box.settle(r);
        }
    }
    function newBox() {
        var box = { done: false, value: undefined, error: undefined };
        box.settle = function (v) {
            if (box.done) { return; }
            if (v !== undefined && v !== null && typeof v.then === 'function') { finish(box, v); return; }
            box.done = true;
            box.value = v;
            host.wake();
        };
        box.fail = function (e) { if (!box.done) { box.done = true; box.error = e === undefined ? new Error('undefined') : e; host.wake(); } };
        return box;
    }

    return {
        predicate: function (fn, reqText) {
            var config = { request: JSON.parse(reqText), state: S.state, logger: logger };
            downcast(config);
            return !!fn(config, logger, S.state);
        },
        respond: function (fn, reqText) {
            var box = newBox();
            var config = { request: JSON.parse(reqText), state: S.state, logger: logger, callback: box.settle };
            downcast(config);
            var r = fn(config, S.injectState, logger, box.settle, S.state);
            if (r !== undefined) { box.settle(r); }
            return box;
        },
        decorate: function (fn, reqText, respText) {
            var box = newBox(), response = JSON.parse(respText);
            var config = { request: JSON.parse(reqText), response: response, logger: logger, state: S.state };
            downcast(config);
            var r = fn(config, response, logger);
            if (r !== undefined && r !== null && typeof r.then === 'function') {
                r.then(function (v) { box.settle(v || response); }, box.fail);
            } else {
                box.settle(r || response);
            }
            return box;
        },
        wait: function (fn) { return fn(); },
        generate: function (fn, reqText) {
            var out = [];
            out.push.apply(out, Array.from(fn({ request: JSON.parse(reqText), logger: logger })));
            return JSON.stringify(out);
        },
        endOfRequest: function (fn, data, text) {
            var d = new Buffer(data);
            return !!fn(text ? d.toString('utf8') : d, logger);
        },
        // A result as JSON, as node's JSON.stringify makes it (a Buffer
        // through its toJSON).
        stringify: function (v) { return JSON.stringify(v); },
        errorText: function (e) {
            if (e && typeof e === 'object' && 'message' in e) { return String(e.message); }
            return String(e);
        },
        // The state travels as one JSON text: the imposter's state, and
        // the injectState that old-style response functions get as their
        // second argument (another object, also kept for the imposter).
        getState: function () {
            var inj = JSON.stringify(S.injectState);
            return inj === '{}' ? JSON.stringify(S.state) : JSON.stringify({ imposterState: S.state, injectState: S.injectState, __fenceline: true });
        },
        setState: function (t) {
            var v = t === '' ? {} : JSON.parse(t);
            if (v && v.__fenceline === true) {
                S.state = v.imposterState || {};
                S.injectState = v.injectState || {};
            } else {
                S.state = v || {};
                S.injectState = {};
            }
        },
        run: function (fn, args) { return fn.apply(null, args); }
    };
})
