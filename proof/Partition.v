(** The partition check of kernel/merge (partition.go): ranges [lo, hi) assigned to parts, or
    hash remainders r (the range [r, r+1) of the space [0, m)), covering a key space exactly
    once. *)
From Coq Require Import ZArith List Bool Lia Sorting.Permutation Sorting.Sorted RelationClasses.
From Loam Require Import Values Merge.
Import ListNotations.
Open Scope Z_scope.

Definition range := (Z * Z)%type.

Definition in_range (x : Z) (r : range) : bool := (fst r <=? x) && (x <? snd r).

(** How many ranges (over all parts) contain x, and how many should: 1 in the space, 0
    outside. *)
Definition cover (parts : list (list range)) (x : Z) : nat := length (filter (in_range x) (concat parts)).
Definition want (space : range) (x : Z) : nat := if in_range x space then 1%nat else 0%nat.

Definition exact_cover (space : range) (parts : list (list range)) : Prop :=
  forall x, cover parts x = want space x.

(** The part of every range containing x, ascending, once per range. *)
Fixpoint owners_from (i : nat) (parts : list (list range)) (x : Z) : list nat :=
  match parts with
  | [] => []
  | rs :: ps => repeat i (length (filter (in_range x) rs)) ++ owners_from (S i) ps x
  end.
Definition owners parts x := owners_from 0 parts x.

Inductive finding := Partition | EmptyPart (i : nat) | At (x : Z) (own : list nat).

Fixpoint first_empty (i : nat) (parts : list (list range)) : option nat :=
  match parts with
  | [] => None
  | [] :: _ => Some i
  | _ :: ps => first_empty (S i) ps
  end.

(** cover and want change only at range ends and space ends, so the smallest point where
    they differ, if any, is one of them. *)
Definition candidates (space : range) (parts : list (list range)) : list Z :=
  fst space :: snd space :: flat_map (fun r => [fst r; snd r]) (concat parts).

Definition mismatch (space : range) (parts : list (list range)) (x : Z) : bool :=
  negb (Nat.eqb (cover parts x) (want space x)).

Definition check (space : range) (parts : list (list range)) : finding :=
  match first_empty 0 parts with
  | Some i => EmptyPart i
  | None =>
      match find (mismatch space parts) (isort Z.leb (candidates space parts)) with
      | None => Partition
      | Some x => At x (owners parts x)
      end
  end.

Definition check_modulus (m : Z) (rems : list (list Z)) : finding :=
  check (0, m) (map (map (fun r => (r, r + 1))) rems).

(** ** Proofs *)

Lemma zleb_total : forall a b, (a <=? b) = false -> (b <=? a) = true.
Proof. intros a b H. apply Z.leb_gt in H. apply Z.leb_le. lia. Qed.
Lemma zleb_trans : forall a b c, (a <=? b) = true -> (b <=? c) = true -> (a <=? c) = true.
Proof. intros a b c H1 H2. apply Z.leb_le in H1, H2. apply Z.leb_le. lia. Qed.

Lemma find_none_iff : forall {A} (f : A -> bool) l, find f l = None <-> forall x, In x l -> f x = false.
Proof.
  intros A f l. split; [apply find_none|].
  induction l as [|y l IH]; intros H; simpl; auto.
  rewrite (H y (or_introl eq_refl)). apply IH. intros x Hx. apply H. right. auto.
Qed.

(** The largest of y :: l. *)
Fixpoint zmax (y : Z) (l : list Z) : Z := match l with [] => y | z :: l' => Z.max y (zmax z l') end.

Lemma zmax_ge : forall l y x, In x (y :: l) -> x <= zmax y l.
Proof.
  induction l as [|z l IH]; intros y x H; simpl in *.
  - destruct H as [H|H]; [lia|contradiction].
  - destruct H as [H|H]; [lia|]. specialize (IH z x H). lia.
Qed.

Lemma zmax_in : forall l y, In (zmax y l) (y :: l).
Proof.
  induction l as [|z l IH]; intros y; simpl; [auto|].
  destruct (Z.max_spec y (zmax z l)) as [[_ E]|[_ E]]; rewrite E; [right; apply IH|left; auto].
Qed.

Lemma range_ends_in : forall space parts r, In r (concat parts) ->
    In (fst r) (candidates space parts) /\ In (snd r) (candidates space parts).
Proof.
  intros space parts r H. unfold candidates. split; right; right; apply in_flat_map; exists r; simpl; auto.
Qed.

Lemma filter_false : forall {A} (f : A -> bool) l, (forall a, In a l -> f a = false) -> filter f l = [].
Proof. induction l as [|a l IH]; intros H; simpl; auto. rewrite H by (left; auto). apply IH. intros; apply H; right; auto. Qed.

(** Every point agrees with a candidate point at or below it on cover and want, or is covered
    by nothing and outside the space: cover and want change only at candidate points. *)
Lemma candidate_below : forall space parts x,
    (exists p, In p (candidates space parts) /\ p <= x /\ cover parts p = cover parts x /\ want space p = want space x) \/
    (cover parts x = 0%nat /\ want space x = 0%nat).
Proof.
  intros space parts x.
  destruct (filter (fun p => p <=? x) (candidates space parts)) as [|b bs] eqn:Eb.
  - (* every candidate is above x: nothing covers it, and it is below the space *)
    right.
    assert (Hab : forall p, In p (candidates space parts) -> x < p).
    { intros p Hp. destruct (p <=? x) eqn:E.
      - assert (Hin : In p (filter (fun p => p <=? x) (candidates space parts))) by (apply filter_In; auto).
        rewrite Eb in Hin. contradiction.
      - apply Z.leb_gt in E. exact E. }
    unfold cover, want. rewrite filter_false.
    + assert (x < fst space) by (apply Hab; left; auto). unfold in_range.
      replace (fst space <=? x) with false by (symmetry; apply Z.leb_gt; lia). auto.
    + intros r Hr. destruct (range_ends_in space parts r Hr) as [Hlo _].
      specialize (Hab _ Hlo). unfold in_range. replace (fst r <=? x) with false by (symmetry; apply Z.leb_gt; lia). reflexivity.
  - (* p, the largest candidate at most x: no range or space end lies in (p, x] *)
    left. set (p := zmax b bs).
    assert (Hp : In p (filter (fun p => p <=? x) (candidates space parts))) by (rewrite Eb; apply zmax_in).
    apply filter_In in Hp. destruct Hp as [Hpc Hpx]. apply Z.leb_le in Hpx.
    assert (Hmax : forall c, In c (candidates space parts) -> c <= x -> c <= p).
    { intros c Hc Hcx. apply zmax_ge. rewrite <- Eb. apply filter_In. split; auto. apply Z.leb_le; auto. }
    assert (Same : forall r, In (fst r) (candidates space parts) -> In (snd r) (candidates space parts) ->
                   in_range x r = in_range p r).
    { intros r Hlo Hhi. unfold in_range.
      destruct (Z.le_gt_cases (fst r) x) as [L|L].
      - pose proof (Hmax _ Hlo L).
        replace (fst r <=? x) with true by (symmetry; apply Z.leb_le; lia).
        replace (fst r <=? p) with true by (symmetry; apply Z.leb_le; lia). simpl.
        destruct (Z.le_gt_cases (snd r) x) as [M|M].
        + pose proof (Hmax _ Hhi M).
          replace (x <? snd r) with false by (symmetry; apply Z.ltb_ge; lia).
          replace (p <? snd r) with false by (symmetry; apply Z.ltb_ge; lia). reflexivity.
        + replace (x <? snd r) with true by (symmetry; apply Z.ltb_lt; lia).
          replace (p <? snd r) with true by (symmetry; apply Z.ltb_lt; lia). reflexivity.
      - replace (fst r <=? x) with false by (symmetry; apply Z.leb_gt; lia).
        replace (fst r <=? p) with false by (symmetry; apply Z.leb_gt; lia). reflexivity. }
    exists p. split; [exact Hpc|]. split; [exact Hpx|]. unfold cover, want. split.
    + rewrite (filter_ext_in (in_range x) (in_range p)); [reflexivity|].
      intros r Hr. destruct (range_ends_in space parts r Hr). apply Same; auto.
    + rewrite Same by (unfold candidates; simpl; auto). reflexivity.
Qed.

(** Checking the candidate points is enough: agreeing there, cover and want agree everywhere. *)
Lemma candidates_suffice : forall space parts,
    (forall p, In p (candidates space parts) -> cover parts p = want space p) -> exact_cover space parts.
Proof.
  intros space parts H x.
  destruct (candidate_below space parts x) as [[p [Hp [_ [C W]]]]|[C W]]; [|congruence].
  rewrite <- C, <- W. apply H. exact Hp.
Qed.

Theorem check_exact : forall space parts, first_empty 0 parts = None ->
    (check space parts = Partition <-> exact_cover space parts).
Proof.
  intros space parts He. unfold check. rewrite He. split.
  - intros H. apply candidates_suffice. intros p Hp.
    destruct (find (mismatch space parts) (isort Z.leb (candidates space parts))) eqn:F; [discriminate|].
    rewrite find_none_iff in F. specialize (F p).
    assert (In p (isort Z.leb (candidates space parts))).
    { apply (Permutation_in _ (Permutation_sym (isort_perm Z.leb _))). exact Hp. }
    specialize (F H0). unfold mismatch in F. apply negb_false_iff in F. apply Nat.eqb_eq. exact F.
  - intros Hx. replace (find (mismatch space parts) (isort Z.leb (candidates space parts))) with (@None Z); [reflexivity|].
    symmetry. apply find_none_iff. intros p _. unfold mismatch. rewrite (Hx p), Nat.eqb_refl. reflexivity.
Qed.

Lemma first_empty_none : forall parts i, first_empty i parts = None <-> Forall (fun rs => rs <> []) parts.
Proof.
  induction parts as [|rs ps IH]; intros i; simpl; split; intros H; auto.
  - destruct rs; [discriminate|]. constructor; [congruence|]. apply (IH (S i)); auto.
  - inversion H; subst. destruct rs; [congruence|]. apply (IH (S i)); auto.
Qed.

(** The partition check accepts exactly the exact covers by non-empty parts. *)
Theorem check_partition_iff : forall space parts,
    check space parts = Partition <-> Forall (fun rs => rs <> []) parts /\ exact_cover space parts.
Proof.
  intros space parts. destruct (first_empty 0 parts) eqn:E.
  - unfold check. rewrite E. split; [discriminate|]. intros [HF _].
    apply (first_empty_none parts 0) in HF. congruence.
  - rewrite check_exact by exact E. split; [|tauto]. intros; split; auto. apply (first_empty_none parts 0). exact E.
Qed.

Lemma owners_length : forall parts i x, length (owners_from i parts x) = length (filter (in_range x) (concat parts)).
Proof.
  induction parts as [|rs ps IH]; intros i x; simpl; auto.
  rewrite app_length, repeat_length, filter_app, app_length, IH. reflexivity.
Qed.

Lemma owners_bound : forall parts i x o, In o (owners_from i parts x) -> (i <= o < i + length parts)%nat.
Proof.
  induction parts as [|rs ps IH]; intros i x o H; simpl in *; [contradiction|].
  apply in_app_or in H. destruct H as [H|H].
  - apply repeat_spec in H. lia.
  - specialize (IH _ _ _ H). lia.
Qed.

(** Under an accepted cover every key of the space lands in exactly one shard, and no key
    outside it in any. *)
Theorem accepted_unique_owner : forall space parts, check space parts = Partition ->
    forall x, (in_range x space = true -> exists i, owners parts x = [i] /\ (i < length parts)%nat) /\
              (in_range x space = false -> owners parts x = []).
Proof.
  intros space parts H x. apply check_partition_iff in H. destruct H as [_ H].
  specialize (H x). unfold cover, want in H. unfold owners.
  pose proof (owners_length parts 0 x) as L. split; intros Hs; rewrite Hs in H.
  - destruct (owners_from 0 parts x) as [|i [|j l]] eqn:E; simpl in L; try lia.
    exists i. split; auto. pose proof (owners_bound parts 0 x i) as B. rewrite E in B. simpl in B.
    specialize (B (or_introl eq_refl)). lia.
  - destruct (owners_from 0 parts x); simpl in L; auto; lia.
Qed.


(** A finding names a point that really is covered a wrong number of times, with the part of
    every range covering it. *)
Theorem check_at_wrong : forall space parts x own, check space parts = At x own ->
    cover parts x <> want space x /\ own = owners parts x.
Proof.
  intros space parts x own. unfold check.
  destruct (first_empty 0 parts); [discriminate|].
  destruct (find (mismatch space parts) (isort Z.leb (candidates space parts))) as [z|] eqn:F; [|discriminate].
  intros H. injection H as <- <-. apply find_some in F. destruct F as [_ F].
  unfold mismatch in F. apply negb_true_iff, Nat.eqb_neq in F. auto.
Qed.

Lemma find_first_sorted : forall (f : Z -> bool) l x p, Sorted (fun a b => (a <=? b) = true) l ->
    find f l = Some x -> In p l -> f p = true -> x <= p.
Proof.
  intros f l. induction l as [|a l IH]; intros x p HS F Hin Hp; [contradiction|].
  simpl in F. apply Sorted_inv in HS. destruct HS as [HS Hd].
  destruct (f a) eqn:Ea.
  - injection F as <-. destruct Hin as [<-|Hin]; [lia|].
    assert (T : Transitive (fun a b => (a <=? b) = true)).
    { intros u v w H1 H2. apply Z.leb_le in H1, H2. apply Z.leb_le. lia. }
    pose proof (Sorted_extends T (Sorted_cons HS Hd)) as Hall. rewrite Forall_forall in Hall.
    apply Z.leb_le. apply Hall. exact Hin.
  - destruct Hin as [<-|Hin]; [congruence|]. eapply IH; eauto.
Qed.

(** And it is the smallest such point. *)
Theorem check_at_minimal : forall space parts x own, check space parts = At x own ->
    forall y, y < x -> cover parts y = want space y.
Proof.
  intros space parts x own H y Hy. unfold check in H.
  destruct (first_empty 0 parts); [discriminate|].
  destruct (find (mismatch space parts) (isort Z.leb (candidates space parts))) as [z|] eqn:F; [|discriminate].
  injection H as <- _.
  destruct (Nat.eq_dec (cover parts y) (want space y)) as [E|E]; [exact E|exfalso].
  destruct (candidate_below space parts y) as [[p [Hp [Hpy [C W]]]]|[C W]]; [|congruence].
  assert (Mp : mismatch space parts p = true).
  { unfold mismatch. rewrite C, W. apply negb_true_iff, Nat.eqb_neq. exact E. }
  assert (Hin : In p (isort Z.leb (candidates space parts)))
    by (apply (Permutation_in _ (Permutation_sym (isort_perm Z.leb _))); exact Hp).
  pose proof (find_first_sorted _ _ _ _ (isort_sorted Z.leb zleb_total _) F Hin Mp). lia.
Qed.
