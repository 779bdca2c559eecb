(** Values and ORDER BY, exactly as kernel/merge defines them (value.go, order.go).

    A value is NULL, a boolean, an exact decimal [VNum coef scale] (the number
    coef × 10^-scale shown with [scale] digits after the point) or text as its bytes,
    compared bytewise as under COLLATE "C". *)
From Coq Require Import ZArith List Bool QArith Lia.
Import ListNotations.
Open Scope Z_scope.

Inductive value :=
| VNull
| VBool (b : bool)
| VNum (coef : Z) (scale : Z)
| VText (bytes : list Z).

Definition row := list value.

(** A total preorder given as a three-way comparison: antisymmetric and transitive. *)
Definition TP {A} (f : A -> A -> comparison) : Prop :=
  (forall a b, f b a = CompOpp (f a b)) /\
  (forall a b c, f a b <> Gt -> f b c <> Gt -> f a c <> Gt).

Section TPFacts.
  Context {A : Type} (f : A -> A -> comparison) (H : TP f).

  Lemma tp_refl : forall a, f a a = Eq.
  Proof.
    intros a. destruct H as [As _]. pose proof (As a a) as E.
    destruct (f a a); simpl in E; congruence.
  Qed.

  Lemma tp_eq_trans : forall a b c, f a b = Eq -> f b c = Eq -> f a c = Eq.
  Proof.
    intros a b c E1 E2. destruct H as [As T].
    assert (N1 : f a c <> Gt) by (apply (T a b c); congruence).
    assert (N2 : f c a <> Gt).
    { apply (T c b a); rewrite As; [rewrite E2|rewrite E1]; simpl; congruence. }
    rewrite As in N2. destruct (f a c); simpl in *; congruence.
  Qed.

  Lemma tp_lt_eq : forall a b c, f a b = Lt -> f b c = Eq -> f a c = Lt.
  Proof.
    intros a b c E1 E2. destruct H as [As T].
    assert (N1 : f a c <> Gt) by (apply (T a b c); congruence).
    destruct (f a c) eqn:E; try congruence.
    exfalso. apply (T b c a); [congruence| rewrite As, E; simpl; congruence| rewrite As, E1; reflexivity].
  Qed.

  Lemma tp_eq_lt : forall a b c, f a b = Eq -> f b c = Lt -> f a c = Lt.
  Proof.
    intros a b c E1 E2. destruct H as [As T].
    assert (N1 : f a c <> Gt) by (apply (T a b c); congruence).
    destruct (f a c) eqn:E; try congruence.
    exfalso. apply (T c a b); [rewrite As, E; simpl; congruence| congruence| rewrite As, E2; reflexivity].
  Qed.

  Lemma tp_lt_trans : forall a b c, f a b = Lt -> f b c = Lt -> f a c = Lt.
  Proof.
    intros a b c E1 E2. destruct H as [As T].
    assert (N1 : f a c <> Gt) by (apply (T a b c); congruence).
    destruct (f a c) eqn:E; try congruence.
    exfalso. apply (T b c a); [congruence| rewrite As, E; simpl; congruence| rewrite As, E1; reflexivity].
  Qed.
End TPFacts.

Lemma tp_lex {A} (f g : A -> A -> comparison) :
  TP f -> TP g -> TP (fun a b => match f a b with Eq => g a b | c => c end).
Proof.
  intros Hf Hg. pose proof Hf as [Af Tf]. pose proof Hg as [Ag Tg]. split.
  - intros a b. rewrite Af. destruct (f a b); simpl; auto.
  - intros a b c N1 N2.
    destruct (f a b) eqn:E1; destruct (f b c) eqn:E2; try congruence.
    + rewrite (tp_eq_trans f Hf a b c E1 E2). eauto.
    + rewrite (tp_eq_lt f Hf a b c E1 E2). congruence.
    + rewrite (tp_lt_eq f Hf a b c E1 E2). congruence.
    + rewrite (tp_lt_trans f Hf a b c E1 E2). congruence.
Qed.

Lemma tp_map {A B} (p : A -> B) (f : B -> B -> comparison) :
  TP f -> TP (fun a b => f (p a) (p b)).
Proof. intros [Af Tf]. split; intros; eauto. Qed.

(** ** Comparing values: [Compare] of value.go *)

(** The number coef × 10^-scale as a rational. *)
Definition num_q (c s : Z) : Q := Qmake c (Z.to_pos (10 ^ s)).

(** The classes across kinds (never met within one SQL column): bool < number < text < NULL. *)
Definition class (v : value) : Z :=
  match v with VBool _ => 1 | VNum _ _ => 2 | VText _ => 3 | VNull => 4 end.

Fixpoint bytes_cmp (a b : list Z) : comparison :=
  match a, b with
  | [], [] => Eq
  | [], _ => Lt
  | _, [] => Gt
  | x :: a', y :: b' => match Z.compare x y with Eq => bytes_cmp a' b' | c => c end
  end.

Definition bool_cmp (a b : bool) : comparison :=
  match a, b with false, true => Lt | true, false => Gt | _, _ => Eq end.

Definition vcmp (a b : value) : comparison :=
  match a, b with
  | VBool x, VBool y => bool_cmp x y
  | VNum c1 s1, VNum c2 s2 => Qcompare (num_q c1 s1) (num_q c2 s2)
  | VText x, VText y => bytes_cmp x y
  | VNull, VNull => Eq
  | _, _ => Z.compare (class a) (class b)
  end.

Lemma bytes_cmp_tp : TP bytes_cmp.
Proof.
  split.
  - induction a as [|x a IH]; destruct b as [|y b]; simpl; auto.
    rewrite (Z.compare_antisym x y). destruct (x ?= y); simpl; auto.
  - induction a as [|x a IH]; destruct b as [|y b]; destruct c as [|z c]; simpl; intros N1 N2; try congruence.
    destruct (Z.compare_spec x y); destruct (Z.compare_spec y z); subst; try congruence;
      try (rewrite Z.compare_refl; eauto; fail);
      match goal with
      | |- context [Z.compare ?p ?q] =>
          let E := fresh in
          assert (E : Z.compare p q = Lt) by (apply Z.compare_lt_iff; lia); rewrite E; congruence
      end.
Qed.

Lemma bool_cmp_tp : TP bool_cmp.
Proof.
  split.
  - destruct a, b; reflexivity.
  - destruct a, b, c; simpl; congruence.
Qed.

Lemma Qcompare_tp : TP Qcompare.
Proof.
  split.
  - intros a b. rewrite <- Qcompare_antisym. reflexivity.
  - intros a b c N1 N2. apply Qle_alt. apply Qle_alt in N1, N2. eapply Qle_trans; eauto.
Qed.

Lemma vcmp_tp : TP vcmp.
Proof.
  split.
  - intros a b; destruct a, b; cbn [vcmp];
      first [reflexivity | apply (proj1 bool_cmp_tp) | apply (proj1 Qcompare_tp) | apply (proj1 bytes_cmp_tp)].
  - intros a b c; destruct a, b, c; cbn [vcmp class]; intros N1 N2; try (vm_compute; congruence); try (vm_compute in N1; congruence); try (vm_compute in N2; congruence);
      try (exact (proj2 bool_cmp_tp _ _ _ N1 N2));
      try (exact (proj2 Qcompare_tp _ _ _ N1 N2));
      try (exact (proj2 bytes_cmp_tp _ _ _ N1 N2)).
Qed.

(** ** ORDER BY keys: [OrderBy.Compare] of order.go *)

(** One key: a column, DESC or not, and NULLS FIRST ([Some true]), NULLS LAST ([Some false])
    or Postgres's default ([None]: NULLS LAST for ASC, NULLS FIRST for DESC). *)
Record key := { kcol : Z; kdesc : bool; knulls : option bool }.

Definition nulls_first (k : key) : bool :=
  match knulls k with Some b => b | None => kdesc k end.

Definition is_null (v : value) : bool := match v with VNull => true | _ => false end.

Definition null_cmp (nf desc : bool) (va vb : value) : comparison :=
  match is_null va, is_null vb with
  | true, true => Eq
  | true, false => if nf then Lt else Gt
  | false, true => if nf then Gt else Lt
  | false, false => if desc then vcmp vb va else vcmp va vb
  end.

(** Column [c] of a row (counted from 0; NULL past the end, which the callers refuse first). *)
Fixpoint col (c : Z) (r : row) : value :=
  match r with [] => VNull | v :: r' => if c <=? 0 then v else col (c - 1) r' end.

Definition key_cmp (k : key) (a b : row) : comparison :=
  null_cmp (nulls_first k) (kdesc k) (col (kcol k) a) (col (kcol k) b).

Fixpoint rows_cmp (o : list key) (a b : row) : comparison :=
  match o with
  | [] => Eq
  | k :: o' => match key_cmp k a b with Eq => rows_cmp o' a b | c => c end
  end.

Lemma null_cmp_tp : forall nf desc, TP (null_cmp nf desc).
Proof.
  intros nf desc. pose proof vcmp_tp as [Av Tv]. split.
  - intros a b. unfold null_cmp.
    destruct (is_null a), (is_null b), nf, desc; simpl; auto.
  - intros a b c. unfold null_cmp.
    destruct (is_null a), (is_null b), (is_null c), nf, desc; simpl; intros N1 N2; try congruence; eauto.
Qed.

Lemma key_cmp_tp : forall k, TP (key_cmp k).
Proof.
  intros k. unfold key_cmp.
  exact (tp_map (col (kcol k)) _ (null_cmp_tp (nulls_first k) (kdesc k))).
Qed.

Lemma rows_cmp_tp : forall o, TP (rows_cmp o).
Proof.
  induction o as [|k o IH].
  - split; simpl; congruence.
  - exact (tp_lex (key_cmp k) (rows_cmp o) (key_cmp_tp k) IH).
Qed.
