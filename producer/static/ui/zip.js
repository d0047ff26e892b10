// The members of a ZIP the user dropped, read in the browser: a batch's pages are drawn from
// the archive itself. Only what the viewer needs: the central directory, stored and deflated
// members (no ZIP64, no encryption: such a member is simply shown on a blank page).

const END = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
const END_SIZE = 22;
const MAX_COMMENT = 0xffff;

async function view(file, start, end) {
  return new DataView(await file.slice(start, end).arrayBuffer());
}

// The end record, searched backwards: a comment of up to 64 KiB may follow it.
async function endRecord(file) {
  const size = Math.min(file.size, END_SIZE + MAX_COMMENT);
  const tail = await view(file, file.size - size, file.size);
  for (let at = size - END_SIZE; at >= 0; at -= 1) {
    if (tail.getUint32(at, true) === END) {
      return {
        count: tail.getUint16(at + 10, true),
        size: tail.getUint32(at + 12, true),
        offset: tail.getUint32(at + 16, true),
      };
    }
  }
  return null;
}

async function extract(zip, member) {
  const head = await view(zip, member.local, member.local + 30);
  if (head.getUint32(0, true) !== LOCAL) throw new Error(`${member.name}: no local header`);
  const start = member.local + 30 + head.getUint16(26, true) + head.getUint16(28, true);
  const data = zip.slice(start, start + member.compressed);
  const name = member.name.split("/").pop();
  if (member.method === 0) return new File([data], name);
  if (member.method !== 8) throw new Error(`${member.name}: compression method ${member.method}`);
  const stream = data.stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return new File([await new Response(stream).blob()], name);
}

// The archive's files in its directory's order (folders left out), as the producer numbers
// them in a batch's answer (`index`); each with `file()`, which unpacks it when asked.
export async function zipMembers(zip) {
  const end = await endRecord(zip);
  if (!end || end.offset === 0xffffffff) return [];
  const dir = await view(zip, end.offset, end.offset + end.size);
  const names = new TextDecoder();
  const members = [];
  let at = 0;
  for (let n = 0; n < end.count && at + 46 <= dir.byteLength; n += 1) {
    if (dir.getUint32(at, true) !== CENTRAL) break;
    const nameLength = dir.getUint16(at + 28, true);
    const member = {
      method: dir.getUint16(at + 10, true),
      compressed: dir.getUint32(at + 20, true),
      local: dir.getUint32(at + 42, true),
      name: names.decode(new Uint8Array(dir.buffer, dir.byteOffset + at + 46, nameLength)),
    };
    at += 46 + nameLength + dir.getUint16(at + 30, true) + dir.getUint16(at + 32, true);
    if (!member.name.endsWith("/")) members.push({ ...member, file: () => extract(zip, member) });
  }
  return members;
}
