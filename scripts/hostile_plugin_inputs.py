"""The plugin class of scripts/hostile-campaign.sh: mutants of a real plugin .so (ELF header,
program and dynamic-section edits, byte flips, special files), written by hostile_inputs.py."""
import os
import random
import socket
import struct

from hostile_common import manifest, pick


# ---------------------------------------------------------------------------------------------
# 4. Plugins: mutants of a real plugin. Row: name, directory (one candidate each; "all" has
#    every regular-file mutant together).
# ---------------------------------------------------------------------------------------------
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NAMES = {1: "NEEDED", 2: "PLTRELSZ", 3: "PLTGOT", 4: "HASH", 5: "STRTAB", 6: "SYMTAB", 7: "RELA",
            8: "RELASZ", 9: "RELAENT", 10: "STRSZ", 11: "SYMENT", 12: "INIT", 13: "FINI", 14: "SONAME",
            20: "PLTREL", 23: "JMPREL", 25: "INIT_ARRAY", 26: "FINI_ARRAY", 27: "INIT_ARRAYSZ",
            28: "FINI_ARRAYSZ", 30: "FLAGS", 0x6ffffef5: "GNU_HASH", 0x6ffffff0: "VERSYM",
            0x6ffffffe: "VERNEED", 0x6fffffff: "VERNEEDNUM", 0x6ffffff9: "RELACOUNT", 0x6ffffffb: "FLAGS_1",
            0x6ffffffc: "VERDEF", 0x6ffffffd: "VERDEFNUM"}


class Elf:
    def __init__(self, data):
        self.b = bytearray(data)
        self.phoff, = struct.unpack_from("<Q", self.b, 0x20)
        self.shoff, = struct.unpack_from("<Q", self.b, 0x28)
        self.phnum, = struct.unpack_from("<H", self.b, 0x38)
        self.shnum, = struct.unpack_from("<H", self.b, 0x3C)
        self.phdrs = [struct.unpack_from("<IIQQQQQQ", self.b, self.phoff + 56 * i) for i in range(self.phnum)]
        self.dyn = next((p[2], p[5]) for p in self.phdrs if p[0] == PT_DYNAMIC)
        self.shdrs = [struct.unpack_from("<IIQQQQIIQQ", self.b, self.shoff + 64 * i) for i in range(self.shnum)]

    def dyn_entries(self):
        off, size = self.dyn
        out = []
        for i in range(size // 16):
            tag, val = struct.unpack_from("<qQ", self.b, off + 16 * i)
            if tag == 0:
                break
            out.append((i, tag, val, off + 16 * i))
        return out

    def to_off(self, vaddr):
        for p in self.phdrs:
            if p[0] == PT_LOAD and p[3] <= vaddr < p[3] + p[5]:
                return vaddr - p[3] + p[2]
        return None

    def sections(self, stype):
        return [(s[4], s[5], s[9]) for s in self.shdrs if s[1] == stype]


def plugins(out, quick, so_path):
    with open(so_path, "rb") as f:
        orig = f.read()
    elf = Elf(orig)
    rows = []
    all_dir = os.path.join(out, "all")
    os.makedirs(all_dir)

    def add(name, data=None, special=None):
        d = os.path.join(out, name)
        os.makedirs(d)
        target = os.path.join(d, "mut_%s.so" % name)
        if data is not None:
            for p in (target, os.path.join(all_dir, "mut_%s.so" % name)):
                with open(p, "wb") as f:
                    f.write(bytes(data))
        elif special == "fifo":
            os.mkfifo(os.path.join(d, "x.so"))
        elif special == "dir":
            os.makedirs(os.path.join(d, "y.so"))
        elif special == "symlink_loop":
            os.symlink("b.so", os.path.join(d, "a.so"))
            os.symlink("a.so", os.path.join(d, "b.so"))
        elif special == "dangling":
            os.symlink("/nonexistent/z.so", os.path.join(d, "z.so"))
        elif special == "dev_zero":
            os.symlink("/dev/zero", os.path.join(d, "zero.so"))
        elif special == "dev_urandom":
            os.symlink("/dev/urandom", os.path.join(d, "urandom.so"))
        elif special == "socket":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(os.path.join(d, "sock.so"))
            s.close()
        elif special == "unreadable":
            p = os.path.join(d, "unreadable.so")
            with open(p, "wb") as f:
                f.write(orig)
            os.chmod(p, 0)
        rows.append((name, d))

    def patched(fn):
        b = bytearray(orig)
        fn(b)
        return b

    size = len(orig)
    add("intact_copy", orig)
    for n in (0, 1, 16, 63, 64, 100, 1000, 4096, 8192, size // 2, size - 1):
        add("truncated_%d" % n, orig[:n])
    rnd = random.Random(41)
    for n in (1, 64, 4096, 100000):
        add("random_%d_bytes" % n, bytes(rnd.getrandbits(8) for _ in range(n)))
    add("elf_magic_then_random", b"\x7fELF" + bytes(rnd.getrandbits(8) for _ in range(8192)))
    add("elf32_class", patched(lambda b: b.__setitem__(4, 1)))
    add("big_endian", patched(lambda b: b.__setitem__(5, 2)))
    add("foreign_machine", patched(lambda b: struct.pack_into("<H", b, 0x12, 183)))
    add("et_exec", patched(lambda b: struct.pack_into("<H", b, 0x10, 2)))
    for field, off, fmt in (("e_phoff", 0x20, "<Q"), ("e_shoff", 0x28, "<Q"), ("e_phentsize", 0x36, "<H"),
                            ("e_phnum", 0x38, "<H"), ("e_shentsize", 0x3A, "<H"), ("e_shnum", 0x3C, "<H"),
                            ("e_shstrndx", 0x3E, "<H")):
        big = 0xFFFF if fmt == "<H" else 0x7FFFFFFFFFFF0000
        add("hdr_%s_huge" % field, patched(lambda b, o=off, f=fmt, v=big: struct.pack_into(f, b, o, v)))
    dyn_ph = next(i for i, p in enumerate(elf.phdrs) if p[0] == PT_DYNAMIC)
    pho = elf.phoff + 56 * dyn_ph
    add("pt_dynamic_offset_beyond_file", patched(lambda b: struct.pack_into("<Q", b, pho + 8, size + 4096)))
    add("pt_dynamic_offset_misaligned", patched(lambda b: struct.pack_into("<Q", b, pho + 8, elf.dyn[0] + 3)))
    add("pt_dynamic_filesz_huge", patched(lambda b: struct.pack_into("<Q", b, pho + 32, 0x7FFFFFFF)))
    add("pt_dynamic_vaddr_garbage", patched(lambda b: struct.pack_into("<Q", b, pho + 16, 0x4141414141)))
    for i, p in enumerate(elf.phdrs):
        if p[0] == PT_LOAD:
            o = elf.phoff + 56 * i
            add("pt_load%d_vaddr_overlap" % i, patched(lambda b, o=o: struct.pack_into("<Q", b, o + 16, 0)))
            add("pt_load%d_memsz_huge" % i, patched(lambda b, o=o: struct.pack_into("<Q", b, o + 40, 1 << 46)))
    variants = {"huge": lambda v: 0x7FFFFFFF0000, "zero": lambda v: 0, "plus7": lambda v: v + 7}
    for idx, tag, val, off in elf.dyn_entries():
        tname = DT_NAMES.get(tag, "0x%x" % tag)
        for vname, fn in variants.items():
            add("dyn%02d_%s_%s" % (idx, tname, vname),
                patched(lambda b, o=off, nv=fn(val): struct.pack_into("<Q", b, o + 8, nv & 0xFFFFFFFFFFFFFFFF)))
        add("dyn%02d_%s_tag_garbage" % (idx, tname), patched(lambda b, o=off: struct.pack_into("<q", b, o, 0x7F)))
    dmap = {tag: val for _, tag, val, _ in elf.dyn_entries()}

    def table(tag_addr, tag_size, entsize):
        o = elf.to_off(dmap.get(tag_addr, -1))
        n = dmap.get(tag_size, 0) // entsize if o is not None else 0
        return o, n

    rela, nrela = table(7, 8, 24)
    if rela is not None:
        def rela_offsets(b):
            for i in range(nrela):
                struct.pack_into("<Q", b, rela + 24 * i, 0x7FFF00000000 + 8 * i)

        def rela_types(b):
            for i in range(nrela):
                struct.pack_into("<Q", b, rela + 24 * i + 8, (5 << 32) | 0x7F)

        def rela_symbols(b):
            for i in range(nrela):
                struct.pack_into("<Q", b, rela + 24 * i + 8, (0xFFFFFF << 32) | 1)

        add("rela_offsets_garbage", patched(rela_offsets))
        add("rela_types_garbage", patched(rela_types))
        add("rela_symbols_beyond_table", patched(rela_symbols))
    jmp, njmp = table(23, 2, 24)
    if jmp is not None and njmp:
        add("jmprel_offsets_garbage",
            patched(lambda b: [struct.pack_into("<Q", b, jmp + 24 * i, 0x41414141) for i in range(njmp)]))
    ini, nini = table(25, 27, 8)
    if ini is not None and nini:
        # the loader applies relocations to init_array: corrupt the addends too
        def init_garbage(b):
            for i in range(nini):
                struct.pack_into("<Q", b, ini + 8 * i, 0x4141414141)
            if rela is not None:
                for i in range(nrela):
                    r_off, r_info, r_add = struct.unpack_from("<QQq", b, rela + 24 * i)
                    if dmap[25] <= r_off < dmap[25] + 8 * nini:
                        struct.pack_into("<q", b, rela + 24 * i + 16, 0x4141414141)
        add("init_array_garbage", patched(init_garbage))
    gh = elf.to_off(dmap.get(0x6ffffef5, -1))
    if gh is not None:
        add("gnu_hash_nbuckets_huge", patched(lambda b: struct.pack_into("<I", b, gh, 0x7FFFFFFF)))
        add("gnu_hash_bloom_size_huge", patched(lambda b: struct.pack_into("<I", b, gh + 8, 0x7FFFFFFF)))
        add("gnu_hash_symoffset_huge", patched(lambda b: struct.pack_into("<I", b, gh + 4, 0x7FFFFFFF)))
        add("gnu_hash_buckets_garbage", patched(lambda b: b.__setitem__(slice(gh + 16, gh + 16 + 512),
                                                                         b"\xff" * 512)))
    sym = elf.to_off(dmap.get(6, -1))
    strsz = dmap.get(10, 0)
    if sym is not None:
        n = (elf.to_off(dmap[5]) - sym) // 24 if 5 in dmap else 0

        def syms(field_off, fmt, value):
            def fn(b):
                for i in range(1, n):
                    struct.pack_into(fmt, b, sym + 24 * i + field_off, value)
            return fn

        add("dynsym_names_beyond_strtab", patched(syms(0, "<I", strsz + 1000)))
        add("dynsym_values_garbage", patched(syms(8, "<Q", 0x4141414141)))
        add("dynsym_sections_garbage", patched(syms(6, "<H", 0xFFF0)))
        add("dynsym_info_garbage", patched(syms(4, "<B", 0xFF)))
    st = elf.to_off(dmap.get(5, -1))
    if st is not None:
        add("strtab_no_terminators", patched(lambda b: b.__setitem__(slice(st, st + strsz), b"x" * strsz)))
        need = [v for _, t, v, _ in elf.dyn_entries() if t == 1]
        if need:
            def missing_lib(b):
                o = st + need[0]
                end = b.index(b"\0", o)
                b[o:end] = (b"libhostile_missing" + b"x" * 64)[: end - o]
            add("needed_library_missing", patched(missing_lib))
    vn = elf.to_off(dmap.get(0x6ffffffe, -1))
    if vn is not None:
        add("verneed_count_huge", patched(lambda b: struct.pack_into("<H", b, vn + 2, 0xFFFF)))
        add("verneed_aux_offset_garbage", patched(lambda b: struct.pack_into("<I", b, vn + 8, 0x7FFFFFF0)))
        add("verneed_next_loop", patched(lambda b: struct.pack_into("<I", b, vn + 12, 0)))
    for stype, name in ((4, "rela"), (11, "dynsym"), (6, "dynamic"), (0x6ffffff6, "gnu_hash")):
        for (o, sz, _) in elf.sections(stype)[:1]:
            for seed in range(6):
                r = random.Random(seed * 1000 + stype)

                def flips(b, o=o, sz=sz, r=r):
                    for _ in range(8):
                        b[o + r.randrange(sz)] = r.getrandbits(8)
                add("flip8_%s_seed%d" % (name, seed), patched(flips))
    for seed in range(30):
        r = random.Random(seed)

        def flips_head(b, r=r):
            for _ in range(16):
                b[r.randrange(min(size, 16384))] = r.getrandbits(8)
        add("flip16_first16k_seed%02d" % seed, patched(flips_head))
    for special in ("fifo", "dir", "symlink_loop", "dangling", "dev_zero", "dev_urandom", "socket", "unreadable"):
        add("special_" + special, special=special)
    rows.append(("all_mutants_in_one_dir", all_dir))
    manifest(out, pick(rows, quick, {"truncated_4096", "init_array_garbage"}))


