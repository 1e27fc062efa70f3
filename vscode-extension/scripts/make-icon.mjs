// Draws images/icon.png (128x128): a note page with a magnifying glass, written as a PNG by hand
// with zlib so no image tool is needed. Run with `npm run icon`; the output is committed.
import { deflateSync } from 'node:zlib';
import { writeFileSync, mkdirSync } from 'node:fs';

const N = 128;
const px = new Uint8Array(N * N * 4);

/** Alpha-blends colour [r,g,b] with coverage a (0..1) onto pixel (x,y). */
function blend(x, y, [r, g, b], a) {
  if (x < 0 || y < 0 || x >= N || y >= N || a <= 0) return;
  const i = (y * N + x) * 4;
  const da = px[i + 3] / 255;
  const oa = a + da * (1 - a);
  for (const [k, c] of [[0, r], [1, g], [2, b]]) {
    px[i + k] = Math.round((c * a + px[i + k] * da * (1 - a)) / (oa || 1));
  }
  px[i + 3] = Math.round(oa * 255);
}

/** Fills every pixel whose centre has signed distance d<0 to a shape, with 1px anti-aliasing. */
function fill(sdf, colour) {
  for (let y = 0; y < N; y++) {
    for (let x = 0; x < N; x++) {
      const d = sdf(x + 0.5, y + 0.5);
      blend(x, y, colour, Math.min(1, Math.max(0, 0.5 - d)));
    }
  }
}

const roundRect = (x0, y0, x1, y1, r) => (x, y) => {
  const qx = Math.abs(x - (x0 + x1) / 2) - (x1 - x0) / 2 + r;
  const qy = Math.abs(y - (y0 + y1) / 2) - (y1 - y0) / 2 + r;
  return Math.hypot(Math.max(qx, 0), Math.max(qy, 0)) + Math.min(Math.max(qx, qy), 0) - r;
};
const circle = (cx, cy, r) => (x, y) => Math.hypot(x - cx, y - cy) - r;
const ring = (cx, cy, r, w) => (x, y) => Math.abs(Math.hypot(x - cx, y - cy) - r) - w / 2;
const segment = (ax, ay, bx, by, w) => (x, y) => {
  const [px_, py_, dx, dy] = [x - ax, y - ay, bx - ax, by - ay];
  const t = Math.min(1, Math.max(0, (px_ * dx + py_ * dy) / (dx * dx + dy * dy)));
  return Math.hypot(px_ - dx * t, py_ - dy * t) - w / 2;
};

fill(roundRect(4, 4, 124, 124, 24), [37, 99, 235]); // background tile
fill(roundRect(24, 16, 92, 108, 8), [255, 255, 255]); // note page
for (const [y, w] of [[34, 44], [48, 36], [62, 40], [76, 22]]) {
  fill(roundRect(34, y, 34 + w, y + 6, 3), [148, 163, 184]); // text lines ("#" heading first)
}
fill(circle(80, 78, 21), [219, 234, 254]); // lens
fill(ring(80, 78, 21, 8), [15, 23, 42]); // rim
fill(segment(95, 93, 113, 111, 11), [15, 23, 42]); // handle

// PNG: signature, IHDR, one IDAT (filter byte 0 per row), IEND.
const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
const crc32 = (buf) => {
  let c = 0xffffffff;
  for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
};
const chunk = (type, data) => {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
};
const ihdr = Buffer.alloc(13);
ihdr.writeUInt32BE(N, 0);
ihdr.writeUInt32BE(N, 4);
ihdr.set([8, 6, 0, 0, 0], 8); // 8-bit RGBA
const raw = Buffer.alloc(N * (N * 4 + 1));
for (let y = 0; y < N; y++) raw.set(px.subarray(y * N * 4, (y + 1) * N * 4), y * (N * 4 + 1) + 1);
const png = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  chunk('IHDR', ihdr),
  chunk('IDAT', deflateSync(raw, { level: 9 })),
  chunk('IEND', Buffer.alloc(0)),
]);
mkdirSync('images', { recursive: true });
writeFileSync('images/icon.png', png);
console.log(`images/icon.png: ${png.length} bytes`);
