//! Where a key lives: its shard, by a hash every node computes alike, and
//! the shard's node, by rendezvous hashing over the nodes a node sees
//! live.
//!
//! Rendezvous (highest random weight) hashing scores every (shard, node)
//! pair and gives the shard to the node with the highest score. Nodes
//! that see the same members agree without talking; a node that joins
//! takes about `1 / (n + 1)` of the shards, each from whichever node held
//! it, and a node that leaves gives up only its own shards, each to the
//! node that scored second. Nothing else moves.
//!
//! Two nodes that see different members for a while may both think a
//! shard theirs: placement only says who tries to claim it. The shard's
//! cluster name (`mod.rs`) decides who holds it.

/// FNV-1a, 64 bits: stable across builds, platforms and runs (unlike the
/// standard library's hasher), which every node must share.
fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325 ^ seed;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// SplitMix64's finaliser: spreads FNV's weak low bits over the word.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The shard of `key` among `shards`.
pub(crate) fn shard_of(key: &str, shards: u32) -> u32 {
    let hash = mix(fnv1a(key.as_bytes(), 0));
    // `shards` is at least 1 (checked where it is set).
    u32::try_from(hash % u64::from(shards.max(1))).unwrap_or(0)
}

/// The node among `live` that shard `shard` of kind `kind` belongs to:
/// the highest score wins, ties (never seen with 64-bit scores) to the
/// higher node number. `None` if `live` is empty.
pub(crate) fn owner(kind: &str, shard: u32, live: &[u32]) -> Option<u32> {
    let kind = fnv1a(kind.as_bytes(), 0);
    live.iter()
        .copied()
        .max_by_key(|&node| (score(kind, shard, node), node))
}

fn score(kind: u64, shard: u32, node: u32) -> u64 {
    mix(kind ^ mix((u64::from(shard) << 32) | u64::from(node)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_the_same_shard_everywhere_and_keys_spread() {
        assert_eq!(shard_of("user-42", 64), shard_of("user-42", 64));
        let mut counts = [0u32; 16];
        for i in 0..16_000 {
            counts[shard_of(&format!("key-{i}"), 16) as usize] += 1;
        }
        // 1 000 each on average; a fair hash stays well within 20%.
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
        // A fixed value: the hash is part of the wire contract between
        // nodes of different builds.
        assert_eq!(shard_of("", 1 << 20), shard_of("", 1 << 20));
        assert_eq!(fnv1a(b"a", 0), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn shards_spread_over_the_nodes() {
        let live = [1, 2, 3];
        let mut per_node = [0u32; 4];
        for shard in 0..3_000 {
            per_node[owner("counter", shard, &live).unwrap() as usize] += 1;
        }
        assert!(
            per_node[1..].iter().all(|&c| (800..1200).contains(&c)),
            "{per_node:?}"
        );
        assert_eq!(owner("counter", 5, &[]), None);
        assert_eq!(owner("counter", 5, &[7]), Some(7));
    }

    #[test]
    fn a_joining_node_takes_shards_only_for_itself_and_a_leaving_one_gives_only_its_own() {
        let before = [1, 2, 3];
        let after = [1, 2, 3, 4];
        let mut moved = 0;
        for shard in 0..4_000 {
            let (was, is) = (
                owner("order", shard, &before).unwrap(),
                owner("order", shard, &after).unwrap(),
            );
            if was != is {
                assert_eq!(is, 4, "shard {shard} moved from {was} to {is}");
                moved += 1;
            }
        }
        // About a quarter moves to the newcomer.
        assert!((800..1200).contains(&moved), "{moved}");
        let without_two = [1, 3];
        for shard in 0..4_000 {
            let was = owner("order", shard, &before).unwrap();
            let is = owner("order", shard, &without_two).unwrap();
            if was != 2 {
                assert_eq!(was, is, "shard {shard} of node {was} moved");
            }
        }
    }

    #[test]
    fn kinds_are_placed_independently() {
        let live = [1, 2];
        let differ = (0..1_000)
            .filter(|&s| owner("a", s, &live) != owner("b", s, &live))
            .count();
        assert!((350..650).contains(&differ), "{differ}");
    }
}
